// One helper per fact: the UTC day. Daily upload quotas (ledger/daily-uploads.ts) and
// daily request limits count by it, so both must cut the day at the same
// instant.

let lastDay = { from: 0, to: 0, day: '' };

/** The UTC day of `now`, as the database's DATE (YYYY-MM-DD). */
export function utcDay(now: Date): string {
  // Every API request asks (the daily request limit); the answer changes once a day.
  const t = now.getTime();
  if (t >= lastDay.from && t < lastDay.to) return lastDay.day;
  const from = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  lastDay = { from, to: from + 86_400_000, day: now.toISOString().slice(0, 10) };
  return lastDay.day;
}

/** The value of a DATE column for `day` (YYYY-MM-DD): its midnight, UTC. */
export const dayDate = (day: string) => new Date(`${day}T00:00:00Z`);
