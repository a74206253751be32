// One process per embedded database: a second process on the same DATA_DIR
// would keep its own copy of PGlite's pages and lose what the other wrote.
// Driven as an operator meets it, with real `dropstream` child processes
// (the compiled CLI: `npm run build` first).
import { readFileSync, readlinkSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { DataDirLockedError, lockDataDir, type LockHolder } from '../src/db/data-dir-lock.js';
import { openDatabase } from '../src/db/client.js';
import { call, uploadFile } from './helpers/client.js';
import { backends, createTestDatabase } from './helpers/databases.js';
import { eventually } from './helpers/raw-upload.js';
import { envWithoutConfig, runToExit } from './helpers/run-to-exit.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const baseEnv = envWithoutConfig();

/** Runs `dropstream ...args` to its end (or kills it after `timeoutMs`). */
async function dropstream(args: string[], env: Record<string, string>, timeoutMs = 20_000) {
  const { code, signal, stdout, stderr } = await runToExit(['bin/dropstream.js', ...args], {
    env: { ...baseEnv, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', ...env },
    deadlineMs: timeoutMs,
  });
  return { code, signal, stdout, stderr };
}

/** /proc facts of this process, as a lock holder on this machine would record them. */
function thisMachine() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return {
    hostname: hostname(),
    bootId: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
    pidNamespace: readlinkSync('/proc/self/ns/pid'),
    startTicks: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!,
  };
}

const lockFile = (dataDir: string) => join(dataDir, 'pglite.lock');

describe('one process per embedded database: the DATA_DIR lock', function () {
  // Each test starts one or two PGlite servers as processes and may run the CLI beside them:
  // 13 s alone at load 13, over 30 s in a CI stage beside two other workers.
  this.timeout(90_000);
  let dataDir: string;
  let server: ServerProcess | undefined;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-lock-'));
  });
  afterEach(async () => {
    await server?.kill();
    server = undefined;
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when a server runs on DATA_DIR, then a second `dropstream serve` exits non-zero with one line naming the pid and the folder', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    const second = await dropstream(['serve'], { DATA_DIR: dataDir });
    expect(second.signal, 'the second server was still running after 20 s').to.equal(null);
    expect(second.code).to.equal(1);
    expect(second.stdout).not.to.include('dropstream listening');
    expect(second.stderr).to.match(/^dropstream: [^\n]+\n$/);
    expect(second.stderr).to.include(`process ${server.child.pid} `);
    expect(second.stderr).to.include(join(dataDir, 'pglite'));
    // The first server is untouched and keeps what it is given.
    const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
    expect((await uploadFile(server.url, key, 'a.txt', 'kept')).status).to.equal(201);
  });

  it('when a server runs on DATA_DIR, then `dropstream migrate` refuses and says to stop the server first', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    const migrate = await dropstream(['migrate'], { DATA_DIR: dataDir });
    expect(migrate.code).to.equal(1);
    expect(migrate.stdout).to.equal('');
    expect(migrate.stderr).to.match(/^dropstream: [^\n]+\n$/);
    expect(migrate.stderr).to.include(`process ${server.child.pid} `);
    expect(migrate.stderr).to.match(/stop it first/);
  });

  it('when the server stops cleanly, then its lock file is gone and `dropstream migrate` runs', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    expect(JSON.parse(await readFile(lockFile(dataDir), 'utf8')).pid).to.equal(server.child.pid);
    await server.kill('SIGTERM');
    await stat(lockFile(dataDir)).then(
      () => expect.fail('lock file left behind'),
      (err: NodeJS.ErrnoException) => expect(err.code).to.equal('ENOENT'),
    );
    const migrate = await dropstream(['migrate'], { DATA_DIR: dataDir });
    expect(migrate.stderr).to.equal('');
    expect(JSON.parse(migrate.stdout)).to.deep.equal({ applied: [] });
  });

  it('when the holder was killed with SIGKILL, then the next start takes its stale lock over and finds the data', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
    const uploaded = await uploadFile(server.url, key, 'before-crash.txt', 'survives');
    expect(uploaded.status).to.equal(201);
    const deadPid = server.child.pid;
    await server.kill('SIGKILL');
    expect(JSON.parse(await readFile(lockFile(dataDir), 'utf8')).pid).to.equal(deadPid);

    const started = Date.now();
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    // Same machine and PID namespace: decided from /proc at once, no waiting for a heartbeat.
    expect(Date.now() - started).to.be.below(10_000);
    expect(JSON.parse(await readFile(lockFile(dataDir), 'utf8')).pid).to.equal(server.child.pid);
    const listed = await call(`${server.url}/api/v1/files`, { key });
    expect(listed.body.files.map((f: { filename: string }) => f.filename)).to.deep.equal(['before-crash.txt']);
  });

  it('when the lock names a live pid whose process started at another time (a reused pid), then it is stale', async () => {
    // This test runner is alive; the recorded start time says the holder was another process with its pid.
    const reused: LockHolder = { ...thisMachine(), pid: process.pid, startTicks: '1', startedAt: '2026-01-01T00:00:00.000Z', token: 'x' };
    await writeFile(lockFile(dataDir), JSON.stringify(reused));
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0' });
    expect(JSON.parse(await readFile(lockFile(dataDir), 'utf8')).pid).to.equal(server.child.pid);
  });

  for (const backend of backends.filter((b) => b === 'postgresql')) {
    it('when DATABASE_URL is set, then two servers share one DATA_DIR and no lock is taken', async () => {
      const database = await createTestDatabase();
      let second: ServerProcess | undefined;
      try {
        server = await startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: database.url, GC_INTERVAL: '0' });
        second = await startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: database.url, GC_INTERVAL: '0' });
        expect((await call(`${second.url}/healthz`)).status).to.equal(200);
        await stat(lockFile(dataDir)).then(
          () => expect.fail(`a lock file on ${backend}`),
          (err: NodeJS.ErrnoException) => expect(err.code).to.equal('ENOENT'),
        );
      } finally {
        await second?.kill();
        await server?.kill();
        server = undefined;
        await database.drop();
      }
    });
  }
});

describe('the DATA_DIR lock, in one process', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dropstream-lock-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('when this process already has the database open, then opening it again is refused too', async () => {
    const db = await openDatabase({ pgliteDir: join(dir, 'pglite') });
    try {
      const again = await openDatabase({ pgliteDir: join(dir, 'pglite') }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(again).to.be.instanceOf(DataDirLockedError);
      expect((again as DataDirLockedError).holder.pid).to.equal(process.pid);
    } finally {
      await db.close();
    }
    // Released by close: it opens again.
    await (await openDatabase({ pgliteDir: join(dir, 'pglite') })).close();
  });

  it('when a dead holder had the very pid of the new opener (a restarted container), then the lock is taken over', async () => {
    const previousLife: LockHolder = { ...thisMachine(), pid: process.pid, startTicks: '1', startedAt: '2026-01-01T00:00:00.000Z', token: 'x' };
    await writeFile(join(dir, 'pglite.lock'), JSON.stringify(previousLife));
    const lock = await lockDataDir(join(dir, 'pglite'));
    expect(JSON.parse(await readFile(join(dir, 'pglite.lock'), 'utf8')).startTicks).to.equal(thisMachine().startTicks);
    await lock.release();
  });

  describe('a holder /proc cannot see (another PID namespace: another container on the volume)', () => {
    const elsewhere = (): LockHolder => ({ ...thisMachine(), pidNamespace: 'pid:[1]', pid: 1, startTicks: '5', startedAt: '2026-01-01T00:00:00.000Z', token: 'x' });
    const timing = { heartbeatMs: 100, staleMs: 600 };

    it('when it keeps touching the lock, then it is alive and the lock is refused', async () => {
      const path = join(dir, 'pglite.lock');
      await writeFile(path, JSON.stringify(elsewhere()));
      const beat = setInterval(() => void utimes(path, new Date(), new Date()).catch(() => {}), 100);
      try {
        const started = Date.now();
        const err = await lockDataDir(join(dir, 'pglite'), timing).then(() => undefined, (e: unknown) => e);
        expect(err).to.be.instanceOf(DataDirLockedError);
        expect(Date.now() - started).to.be.below(timing.staleMs);
      } finally {
        clearInterval(beat);
      }
    });

    it('when this process holds the lock, then it touches the file every heartbeat (so such an opener sees it alive), and the file goes at release', async () => {
      const path = join(dir, 'pglite.lock');
      const lock = await lockDataDir(join(dir, 'pglite'), timing);
      const mtime = async () => (await stat(path)).mtimeMs;
      try {
        // Touches seen one after another: three heartbeats' worth, each later than the last.
        let last = await mtime();
        for (let beats = 0; beats < 3; beats++) {
          const seen = last;
          // A loaded machine may delay a beat: the deadline is generous, the touches are what count.
          last = await eventually(mtime, (m) => m > seen, 5_000);
          expect(last, `beat ${beats + 1}`).to.be.greaterThan(seen);
        }
      } finally {
        await lock.release();
      }
      // Released: the file is gone, so no heartbeat can keep a dead holder looking alive.
      await stat(path).then(
        () => expect.fail('lock file left behind'),
        (err: NodeJS.ErrnoException) => expect(err.code).to.equal('ENOENT'),
      );
    });

    it('when its lock has been silent for longer than the stale time, then it is taken over', async () => {
      const path = join(dir, 'pglite.lock');
      await writeFile(path, JSON.stringify(elsewhere()));
      const started = Date.now();
      const lock = await lockDataDir(join(dir, 'pglite'), timing);
      expect(Date.now() - started).to.be.at.least(timing.staleMs - 50);
      expect(JSON.parse(await readFile(path, 'utf8')).pid).to.equal(process.pid);
      await lock.release();
    });
  });
});
