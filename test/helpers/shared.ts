// One server per backend for all the HTTP suites: starting PGlite and
// applying migrations costs seconds, and accounts isolate tests from each
// other anyway. Closed after the run (after each file in parallel mode).
// Each runs on a test clock (helpers/clock.ts) a suite may move forward by
// a second or so to pass an expiry: to the others sharing the server that is
// a slow second, nothing more (never move it by minutes here).
import { testClock, type TestClock } from './clock.js';
import type { Backend } from './databases.js';
import { startTestServer, type TestServer } from './server.js';

const servers = new Map<Backend, Promise<TestServer>>();
const clocks = new Map<Backend, TestClock>();

export function sharedServer(backend: Backend): Promise<TestServer> {
  let server = servers.get(backend);
  if (!server) {
    const clock = sharedClock(backend);
    server = startTestServer(backend, {}, undefined, { clock });
    servers.set(backend, server);
  }
  return server;
}

/** The clock of the shared server of `backend`. */
export function sharedClock(backend: Backend): TestClock {
  let clock = clocks.get(backend);
  if (!clock) {
    clock = testClock();
    clocks.set(backend, clock);
  }
  return clock;
}

/** Closes every shared server; the next sharedServer() starts a new one (root-hooks.ts calls this after each file in parallel mode). */
export async function closeSharedServers(): Promise<void> {
  const started = [...servers.values()];
  servers.clear();
  clocks.clear();
  await Promise.all(started.map(async (s) => (await s).close()));
}
