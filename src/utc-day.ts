// One helper per fact: the UTC day. Daily upload quotas (ledger/daily-uploads.ts) and
// daily request limits count by it, so both must cut the day at the same
// instant.

/** The UTC day of `now`, as the database's DATE (YYYY-MM-DD). */
export const utcDay = (now: Date) => now.toISOString().slice(0, 10);

/** The value of a DATE column for `day` (YYYY-MM-DD): its midnight, UTC. */
export const dayDate = (day: string) => new Date(`${day}T00:00:00Z`);
