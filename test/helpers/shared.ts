// One server per backend for all the HTTP suites: starting PGlite and
// applying migrations costs seconds, and accounts isolate tests from each
// other anyway. Closed after the run (after each file in parallel mode).
import type { Backend } from './databases.js';
import { startTestServer, type TestServer } from './server.js';

const servers = new Map<Backend, Promise<TestServer>>();

export function sharedServer(backend: Backend): Promise<TestServer> {
  let server = servers.get(backend);
  if (!server) {
    server = startTestServer(backend);
    servers.set(backend, server);
  }
  return server;
}

/** Closes every shared server; the next sharedServer() starts a new one (root-hooks.ts calls this after each file in parallel mode). */
export async function closeSharedServers(): Promise<void> {
  const started = [...servers.values()];
  servers.clear();
  await Promise.all(started.map(async (s) => (await s).close()));
}
