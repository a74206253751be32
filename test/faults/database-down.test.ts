import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { createPrivatePostgres, describeWithPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describeWithPrivatePostgres('faults: the database goes away and comes back (private PostgreSQL cluster)', () => {
  let pg: PrivatePostgres;
  let t: TestServer;
  let key: string;
  let link: string;
  before(async function () {
    this.timeout(120_000);
    pg = createPrivatePostgres();
    t = await startTestServer('postgresql', { DATABASE_URL: pg.url });
    ({ apiKey: key } = await t.account());
    link = (await uploadFile(t.server.url, key, 'kept.txt', 'still here')).body.public_link;
  });
  after(async () => {
    await t?.close().catch(() => {});
    pg?.destroy();
  });

  it('when the database is down, then every endpoint answers 503 database_unavailable with Retry-After, never 404 or 500', async () => {
    pg.stop();
    const requests = [
      call(t.url('/api/v1/stats'), { key }),
      call(t.url('/api/v1/files'), { key }),
      call(t.url('/api/v1/files/1'), { key }),
      call(t.url('/api/v1/files/1'), { method: 'DELETE', key }),
      uploadFile(t.server.url, key, 'new.txt', 'x'),
      call(t.url(link)),
    ];
    for (const res of await Promise.all(requests)) {
      expect(res.status, res.text).to.equal(503);
      expect(res.body.error.code).to.equal('database_unavailable');
      expect(res.headers.get('retry-after')).to.match(/^\d+$/);
    }
    const ready = await call(t.url('/readyz'));
    expect(ready.status).to.equal(503);
    expect(ready.body.checks.database).to.equal('down');
  });

  it('when the database comes back, then the service recovers without a restart', async () => {
    pg.start();
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await call(t.url('/api/v1/stats'), { key })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).to.equal(200);
    const res = await fetch(t.url(link));
    expect(await res.text()).to.equal('still here');
    expect((await uploadFile(t.server.url, key, 'after.txt', 'back')).status).to.equal(201);
  });
});
