// Time is a dependency where it decides: link and file expiry, file request
// and tus upload expiry, sweeps, lockouts. The composition root makes one
// clock and passes it to each of them, so a test moves time instead of
// sleeping past a deadline (test/helpers/clock.ts). SQL that compares with
// the time takes the clock's as a parameter (`${now}::timestamp(3)`), never
// the database's now(), so the process and the database agree on one time.
// Timers that wait on sockets (idle and body deadlines, lock leases racing a
// real process) stay on the wall clock: they measure how long a peer took.

/** The time now, as those who decide by it read it. */
export type Clock = () => Date;

/** The wall clock: what every module gets outside tests. */
export const systemClock: Clock = () => new Date();
