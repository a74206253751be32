// One server per backend for all the HTTP suites: starting PGlite and
// applying migrations costs seconds, and accounts isolate tests from each
// other anyway. Closed once, after the whole run.
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

after(async () => {
  await Promise.all([...servers.values()].map(async (s) => (await s).close()));
});
