// Behind PgBouncer in transaction mode with its default settings (issue 58):
// the server starts (it used to be refused: "unsupported startup parameter:
// statement_timeout"), its query deadlines still fire on PostgreSQL's side,
// they cost no statement, and without DATABASE_DIRECT_URL it says at start
// what will not work and refuses to migrate through the pooler.
import { expect } from 'chai';
import pg from 'pg';
import { openDatabase } from '../../src/db/client.js';
import { isDatabaseUnavailable } from '../../src/db/errors.js';
import { POSTGRES_LISTENER_NAME } from '../../src/notices/postgres.js';
import { StartupError } from '../../src/startup-error.js';
import { call, upload, uploadFile } from '../helpers/client.js';
import { createTestDatabase } from '../helpers/databases.js';
import { captureLog } from '../helpers/log-capture.js';
import { describeWithPgBouncer, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Runs `fn` with a direct connection to `url` (not through the pooler). */
async function direct<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const databaseOf = (url: string) => new URL(url).pathname.slice(1);

/** Advisory locks held in `url`'s database, by any session (a pooler's server connections included). */
const advisoryLocks = (url: string) =>
  direct(url, async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = $1)", [databaseOf(url)])).rows[0].n as number);

describeWithPgBouncer('behind PgBouncer in transaction mode (default settings): deadlines and sessions', function () {
  this.timeout(60_000);
  let bouncer: PgBouncer;
  const databases: Awaited<ReturnType<typeof createTestDatabase>>[] = [];
  const newDatabase = async () => {
    const database = await createTestDatabase();
    databases.push(database);
    return database;
  };
  before(async () => {
    bouncer = await startPgBouncer();
  });
  after(async () => {
    await bouncer?.stop();
    for (const database of databases) await database.drop();
  });

  describe('without DATABASE_DIRECT_URL', () => {
    it('when migrations are pending, then the start stops with one line naming DATABASE_DIRECT_URL, and nothing was migrated through the pooler (no advisory lock left on its server connections)', async () => {
      const database = await newDatabase();
      const err = await startTestServer('postgresql', { DATABASE_URL: bouncer.through(database.url) }).then(
        async (t) => {
          await t.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(StartupError);
      expect((err as Error).message).to.match(/^migrations are pending, and DATABASE_URL goes through a connection pooler that does not keep sessions/).and.include('set DATABASE_DIRECT_URL');
      expect(await direct(database.url, async (c) => (await c.query("SELECT to_regclass('_prisma_migrations') AS t")).rows[0].t)).to.equal(null);
      expect(await advisoryLocks(database.url)).to.equal(0);
    });

    it('when the database is migrated, then the server starts, works, and says at start what will not work (migrations, notices without Redis), holding no LISTEN connection', async () => {
      const database = await newDatabase();
      const migrator = await openDatabase({ url: database.url });
      await migrator.migrate();
      await migrator.close();
      const log = captureLog('warn');
      const t = await startTestServer('postgresql', { DATABASE_URL: bouncer.through(database.url) }, log.logger);
      try {
        const warning = log.lines.find((line) => line.level === 40 && /DATABASE_DIRECT_URL is not set/.test(line.msg ?? ''));
        expect(warning, JSON.stringify(log.lines)).to.not.equal(undefined);
        const without = warning!.without as string[];
        expect(without).to.have.length(2);
        expect(without[0]).to.match(/^migrations: a start with pending migrations/);
        expect(without[1]).to.match(/^notices between instances \(no REDIS_URL\)/);
        const { apiKey } = await t.account();
        expect((await uploadFile(t.server.url, apiKey, 'a.txt', 'through the pooler')).status).to.equal(201);
        expect((await call(t.url('/api/v1/files'), { key: apiKey })).body.files).to.have.length(1);
        const listeners = await direct(database.url, async (c) =>
          (await c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2', [databaseOf(database.url), POSTGRES_LISTENER_NAME])).rows[0].n,
        );
        expect(listeners).to.equal(0);
      } finally {
        await t.close();
      }
    });
  });

  describe('with DATABASE_QUERY_TIMEOUT=1 and DATABASE_DIRECT_URL', () => {
    let database: Awaited<ReturnType<typeof createTestDatabase>>;
    let t: TestServer;
    let key: string;
    let fileId: number;
    before(async () => {
      database = await newDatabase();
      t = await startTestServer('postgresql', { DATABASE_URL: bouncer.through(database.url), DATABASE_DIRECT_URL: database.url, DATABASE_QUERY_TIMEOUT: '1', GC_INTERVAL: '0' });
      ({ apiKey: key } = await t.account());
      fileId = (await uploadFile(t.server.url, key, 'kept.txt', 'still here')).body.file_id;
    });
    after(() => t?.close());

    /** Statements of this server's database that wait for a lock, seen directly on PostgreSQL. */
    const waitingForLocks = () =>
      direct(database.url, async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", [databaseOf(database.url)])).rows[0].n as number);

    it('when a statement sleeps past DATABASE_QUERY_TIMEOUT, then PostgreSQL cancels it at the deadline (57014), rather than the driver giving up on its answer 5 s later', async () => {
      const started = Date.now();
      const err = await t.server.db.prisma.$queryRawUnsafe('SELECT pg_sleep(30)').then(
        () => undefined,
        (e: unknown) => e as Error & { meta?: { driverAdapterError?: { cause?: { originalCode?: string } } } },
      );
      const took = Date.now() - started;
      expect(err, 'the statement was not cut').to.not.equal(undefined);
      expect(err!.meta?.driverAdapterError?.cause?.originalCode, err!.message).to.equal('57014');
      expect(isDatabaseUnavailable(err)).to.equal(true);
      // The driver's own read timeout comes at 6 s (1 s + its 5 s margin) and says "Query read timeout".
      expect(took).to.be.below(5000);
    });

    it('when another session holds a lock on the files past the deadline, then requests answer 503 database_unavailable, and their statements are gone from PostgreSQL, not left waiting on its server connections', async () => {
      await direct(database.url, async (locker) => {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE files IN ACCESS EXCLUSIVE MODE');
        try {
          const answers = await Promise.all([call(t.url('/api/v1/files'), { key }), call(t.url(`/api/v1/files/${fileId}`), { key }), uploadFile(t.server.url, key, 'blocked.txt', 'never stored')]);
          for (const res of answers) {
            expect(res.status, res.text).to.equal(503);
            expect(res.body.error.code).to.equal('database_unavailable');
          }
          // The lock is still held: a statement only abandoned by the driver would still be waiting for it.
          expect(await waitingForLocks()).to.equal(0);
        } finally {
          await locker.query('ROLLBACK');
        }
      });
      expect((await call(t.url('/api/v1/files'), { key })).body.files.map((f: { filename: string }) => f.filename)).to.deep.equal(['kept.txt']);
    });

    it('when a transaction sits idle past the deadline, then PostgreSQL ends it (its server connection goes, and with it its locks)', async () => {
      let resume!: () => void;
      const held = new Promise<void>((resolve) => (resume = resolve));
      let pid: number | undefined;
      // Prisma's own transaction timeout (5 s by default) would roll it back itself: put off.
      const transaction = t.server.db.prisma
        .$transaction(
          async (tx) => {
            pid = (await tx.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid;
            await tx.$queryRaw`SELECT id FROM accounts FOR UPDATE`;
            await held;
            await tx.$queryRaw`SELECT 1`;
          },
          { timeout: 60_000 },
        )
        .then(
          () => 'committed',
          () => 'failed',
        );
      await eventually(async () => pid, (value) => value !== undefined);
      expect(pid).to.be.a('number');
      const alive = () => direct(database.url, async (c) => (await c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0].n as number);
      const left = await eventually(alive, (n) => n === 0, 10_000);
      resume();
      expect(left, 'the idle transaction is still there').to.equal(0);
      expect(await transaction).to.equal('failed');
      // The rows it locked are free: a write to them goes through.
      expect((await call(t.url('/api/v1/files'), { key })).status).to.equal(200);
    });

    it('when requests go through the pooler, then the deadlines cost no statement: a download is one statement and its count one, and a transaction carries its SET LOCALs in its BEGIN', async () => {
      const name = databaseOf(database.url);
      const seen: string[] = [];
      const query = pg.Client.prototype.query;
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const first = args[0] as string | { text?: string };
        if (this.database === name) seen.push((typeof first === 'string' ? first : (first?.text ?? '')).trim());
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
      try {
        const link = (await upload(t.server.url, key, [{ name: 'file', filename: 's.bin', content: 'x'.repeat(5000) }])).body.public_link as string;
        seen.length = 0;
        const res = await fetch(t.url(link));
        await res.arrayBuffer();
        expect(res.status).to.equal(200);
        const statements = await eventually(async () => [...seen], (sent) => sent.some((s) => /^WITH/.test(s)));
        expect(statements.map((s) => s.split(/\s+/)[0])).to.deep.equal(['SELECT', 'WITH']);

        seen.length = 0;
        const { accountId } = await t.account();
        await t.admin('POST', `/admin/accounts/${accountId}/keys`);
        const begins = seen.filter((s) => /^BEGIN/i.test(s));
        expect(begins, seen.join('\n')).to.not.be.empty;
        for (const begin of begins) expect(begin).to.equal('BEGIN; SET LOCAL statement_timeout = 1000; SET LOCAL idle_in_transaction_session_timeout = 1000');
        expect(seen.filter((s) => /^SET\b/i.test(s)), 'a SET of its own costs a round trip').to.deep.equal([]);
      } finally {
        pg.Client.prototype.query = query;
      }
    });
  });
});
