// A start that fails at any step leaves nothing open: the process ends on its
// own, without process.exit, because every listener, timer, pool and
// connection opened before the failing step was closed (src/closers.ts).
// Each case fails one step with everything before it open: PostgreSQL,
// Redis (commands, pub/sub, release notices), the sweep timer.
// Driven through test/helpers/start-once.mjs on the build (`npm run build` first).
import { once } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createTestDatabase } from '../helpers/databases.js';
import { envWithoutConfig, runToExit } from '../helpers/run-to-exit.js';

type TestDatabase = Awaited<ReturnType<typeof createTestDatabase>>;
import { freshPrefix, redisUrl } from '../helpers/redis.js';

const baseEnv = envWithoutConfig();
const DEADLINE_MS = 20_000;

/** Runs one start to the end of its process; killed at the deadline, which fails the test. */
async function startOnce(env: Record<string, string>) {
  const { code, signal, stdout, stderr, ms } = await runToExit(['test/helpers/start-once.mjs'], {
    env: { ...baseEnv, HOST: '127.0.0.1', PORT: '0', ADMIN_PORT: '0', ...env },
    deadlineMs: DEADLINE_MS,
  });
  expect(signal, `the process was still alive at the ${DEADLINE_MS} ms deadline (something was left open); stdout: ${stdout} stderr: ${stderr}`).to.equal(null);
  return { code: code as number, stdout, stderr, ms };
}

/** A port something else listens on. */
async function takenPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as { port: number }).port, server };
}

const postgres = process.env.TEST_DATABASE_URL;

describe('a start that fails at a step leaves nothing open', function () {
  this.timeout(60_000);
  let dataDir: string;
  let database: TestDatabase | undefined;
  let blocker: { port: number; server: Server };
  /** Everything a start can open, PostgreSQL and Redis included when the machine has them. */
  const full = () => ({
    DATA_DIR: dataDir,
    GC_INTERVAL: '60',
    ...(database ? { DATABASE_URL: database.url } : {}),
    ...(redisUrl ? { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: freshPrefix() } : {}),
  });

  before(async () => {
    database = postgres ? await createTestDatabase() : undefined;
    blocker = await takenPort();
  });
  after(async () => {
    blocker.server.close();
    await database?.drop();
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-failed-start-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when nothing fails, then the server starts, closes, and its process ends on its own (the control case)', async () => {
    const run = await startOnce(full());
    expect(run.stdout).to.equal('started\nclosed\n');
    expect(run.code).to.equal(0);
  });

  it('when the database never answers, then the start fails naming it and the process ends', async () => {
    const run = await startOnce({ ...full(), DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none', DATABASE_CONNECT_TIMEOUT: '0' });
    expect(run.stdout).to.match(/^failed: .*127\.0\.0\.1:1\/none/);
  });

  it('when the object store refuses connections (after the database opened), then the start fails and the process ends', async () => {
    const run = await startOnce({ ...full(), STORE: 's3', S3_BUCKET: 'failed-start', S3_ENDPOINT: `http://127.0.0.1:${blocker.port}`, S3_FORCE_PATH_STYLE: 'true' });
    expect(run.stdout).to.match(/^failed: /);
  });

  it('when the admin token cannot be read (after the database, store, Redis and release notices opened), then the start fails and the process ends', async () => {
    await mkdir(join(dataDir, 'admin-token'));
    const run = await startOnce(full());
    expect(run.stdout).to.match(/^failed: EISDIR/);
  });

  it('when the public port is taken (everything else open, the sweep timer running), then the start fails and the process ends', async () => {
    const run = await startOnce({ ...full(), PORT: String(blocker.port) });
    expect(run.stdout).to.match(/^failed: .*EADDRINUSE/);
  });

  it('when the admin port is taken (the public listener already open), then the start fails and the public listener is closed too', async () => {
    const run = await startOnce({ ...full(), ADMIN_PORT: String(blocker.port) });
    expect(run.stdout).to.match(/^failed: .*EADDRINUSE/);
  });
});
