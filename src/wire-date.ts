// Dates as the API writes them (SPEC.md): one owner, because the HTTP answers
// and the webhook bodies written by the database must agree to the character.

/** `YYYY-MM-DD HH:MM:SS`, in UTC. */
export const formatDate = (date: Date) => date.toISOString().slice(0, 19).replace('T', ' ');

/** A time or null, as the spec writes dates. */
export const formatOptionalDate = (date: Date | null | undefined) => (date ? formatDate(date) : null);
