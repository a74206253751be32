// The admin commands' requests have a deadline: a server (or a proxy in
// front of it) that accepts the connection and never answers must not hold
// `dropstream accounts ...` forever; the command ends with one line.
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { expect } from 'chai';
import { adminRequest } from '../../src/cli/admin-client.js';
import { CliError } from '../../src/cli/cli-error.js';

describe('admin API client', () => {
  it('when the admin listener accepts and never answers, then the request fails within its deadline with one line naming the server', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    }).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as { port: number };
    const url = `http://127.0.0.1:${port}`;
    try {
      const started = Date.now();
      const err = await adminRequest({ url, token: 'x', timeoutMs: 300 }, 'GET', '/admin/plans').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(CliError);
      expect((err as Error).message).to.equal(`no answer from the admin API at ${url} within 0.3 s`);
      expect(Date.now() - started).to.be.below(5_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
