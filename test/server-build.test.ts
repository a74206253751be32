// buildServer (src/server.ts) apart from listening (src/start.ts): a built
// server opens no port, its apps answer through their callbacks, and
// closing it ends what it opened.
import { expect } from 'chai';
import { buildTestServer } from './helpers/built-server.js';

/** Listening TCP servers of this process (libuv's handles). */
const listeners = () => process.getActiveResourcesInfo().filter((type) => type === 'TCPServerWrap').length;

describe('buildServer', () => {
  it('when a server is built, then no port is listening, and its public and admin apps answer through their callbacks', async () => {
    const before = listeners();
    const t = await buildTestServer('pglite');
    try {
      expect(listeners()).to.equal(before);
      const { apiKey } = await t.account();
      const stats = await t.call('/api/v1/stats', { key: apiKey });
      expect(stats.status).to.equal(200);
      expect(stats.body.success).to.equal(true);
      expect((await t.call('/readyz')).body.checks).to.include({ database: 'ok', store: 'ok' });
    } finally {
      await t.close();
    }
  });

  it('when a built server starts draining, then readiness answers 503 (shutdown: down), so load balancers stop sending traffic', async () => {
    const t = await buildTestServer('pglite');
    t.built.drain();
    const ready = await t.call('/readyz');
    expect(ready.status).to.equal(503);
    expect(ready.body.checks).to.deep.equal({ shutdown: 'down' });
    await t.close();
  });
});
