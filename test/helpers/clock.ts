// A clock a test moves instead of sleeping past a deadline (src/clock.ts).
// It runs with the wall clock, ahead of it by what the test moved it, so
// what still waits on real time (lock leases, heartbeats, timers) goes on as
// usual; moving it forward is all a test needs to pass an expiry.
import type { Clock } from '../../src/clock.js';

export interface TestClock extends Clock {
  /** Moves the clock `ms` milliseconds ahead (never back: the database's rows were written at earlier times). */
  advance(ms: number): void;
  /** How far ahead of the wall clock it is, in ms. */
  readonly ahead: number;
}

export function testClock(): TestClock {
  let ahead = 0;
  const clock = (() => new Date(Date.now() + ahead)) as TestClock;
  clock.advance = (ms: number) => {
    if (!(ms >= 0)) throw new Error(`a test clock moves forward only (advance(${ms}))`);
    ahead += ms;
  };
  Object.defineProperty(clock, 'ahead', { get: () => ahead });
  return clock;
}
