// PostgreSQL that answers too late or not at all: a lock another session
// holds, and a server behind a proxy that stops forwarding without closing
// (a hung host, a network that drops everything). Each wait has a deadline
// (DATABASE_QUERY_TIMEOUT, 1 s here), so the request gets 503
// database_unavailable instead of hanging with its client, nothing is half
// written, and the service recovers without a restart.
import { expect } from 'chai';
import pg from 'pg';
import { call, uploadFile } from '../helpers/client.js';
import { createTestDatabase, describeWithPostgres } from '../helpers/databases.js';
import { startHangingProxy, type HangingProxy } from '../helpers/hanging-proxy.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The deadline plus the driver's margin for a server that never answers (5 s), and a loaded machine's slack. */
const WITHIN_MS = 9_000;

async function timed<T>(run: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = Date.now();
  const result = await run();
  return { result, ms: Date.now() - started };
}

function expectUnavailable(res: { status: number; text: string; body: any; headers: Headers }) {
  expect(res.status, res.text).to.equal(503);
  expect(res.body.error.code).to.equal('database_unavailable');
  expect(res.headers.get('retry-after')).to.match(/^\d+$/);
}

describeWithPostgres('faults: PostgreSQL answers too late or not at all (DATABASE_QUERY_TIMEOUT)', function () {
  this.timeout(60_000);
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let proxy: HangingProxy;
  let t: TestServer;
  let key: string;
  let fileId: number;

  before(async function () {
    database = await createTestDatabase();
    proxy = await startHangingProxy(database.url);
    const through = new URL(database.url);
    through.port = new URL(proxy.endpoint).port;
    t = await startTestServer('postgresql', { DATABASE_URL: through.toString(), DATABASE_QUERY_TIMEOUT: '1' });
    ({ apiKey: key } = await t.account());
    fileId = (await uploadFile(t.server.url, key, 'kept.txt', 'still here')).body.file_id;
  });
  after(async () => {
    await t?.close().catch(() => {});
    await proxy?.close();
    await database?.drop();
  });

  it('when another session holds a lock on the files past the deadline, then reads and uploads answer 503 at it, and nothing is kept', async () => {
    const locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE files IN ACCESS EXCLUSIVE MODE');
      const { result, ms } = await timed(() =>
        Promise.all([call(t.url('/api/v1/files'), { key }), call(t.url(`/api/v1/files/${fileId}`), { key }), uploadFile(t.server.url, key, 'blocked.txt', 'never stored')]),
      );
      for (const res of result) expectUnavailable(res);
      expect(ms).to.be.below(WITHIN_MS);
      // Cancelled by PostgreSQL at the deadline, not only abandoned by the driver: none still waits for the lock held.
      const name = new URL(database.url).pathname.slice(1);
      const waiting = await locker.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", [name]);
      expect(waiting.rows[0].n, 'statements still waiting for the lock').to.equal(0);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    const list = await call(t.url('/api/v1/files'), { key });
    expect(list.status).to.equal(200);
    expect(list.body.files.map((f: { filename: string }) => f.filename)).to.deep.equal(['kept.txt']);
    expect((await call(t.url('/api/v1/stats'), { key })).body.stats.total_files).to.equal(1);
    expect(await t.objects()).to.have.length(1);
  });

  it('when PostgreSQL stops answering without closing, then requests answer 503 within the deadline and /readyz says down; once it answers, the service recovers', async () => {
    proxy.hang();
    try {
      // Connections the pool already holds wait for an answer; new ones wait to connect. Both end.
      const { result, ms } = await timed(() =>
        Promise.all([
          call(t.url(`/api/v1/files/${fileId}`), { key }),
          call(t.url('/api/v1/files'), { key }),
          call(t.url('/api/v1/stats'), { key }),
          uploadFile(t.server.url, key, 'hung.txt', 'never stored'),
          ...Array.from({ length: 12 }, () => call(t.url(`/api/v1/files/${fileId}`), { key })),
        ]),
      );
      for (const res of result) expectUnavailable(res);
      expect(ms).to.be.below(WITHIN_MS);
      const ready = await call(t.url('/readyz'));
      expect(ready.status).to.equal(503);
      expect(ready.body.checks.database).to.equal('down');
    } finally {
      proxy.recover();
    }
    const stats = await eventually(() => call(t.url('/api/v1/stats'), { key }), (res) => res.status === 200);
    expect(stats.status).to.equal(200);
    const list = await call(t.url('/api/v1/files'), { key });
    expect(list.body.files.map((f: { filename: string }) => f.filename)).to.deep.equal(['kept.txt']);
    expect((await uploadFile(t.server.url, key, 'after.txt', 'back')).status).to.equal(201);
  });
});
