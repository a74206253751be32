// Dates as the API writes them (SPEC.md): one owner, because the HTTP answers
// and the webhook bodies and files list written by the database must agree to the character.
import { Prisma } from './generated/prisma/client.js';

/** `YYYY-MM-DD HH:MM:SS`, in UTC. */
export const formatDate = (date: Date) => date.toISOString().slice(0, 19).replace('T', ' ');

/** A time or null, as the spec writes dates. */
export const formatOptionalDate = (date: Date | null | undefined) => (date ? formatDate(date) : null);

/** The same format written by PostgreSQL, from a timestamp column (`f.created_at`; a fixed name, never input). */
export const sqlDate = (column: string) => Prisma.raw(`to_char(${column}, 'YYYY-MM-DD HH24:MI:SS')`);
