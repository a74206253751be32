// What an operator sees when the server cannot start yet, or at all: the
// database not up (yet), DATA_DIR unusable. Driven as `dropstream serve` in a
// child process (the compiled CLI: `npm run build` first), reading its
// stdout log lines and its one stderr line.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { configVariables } from '../../src/config.js';
import { waitForDatabase } from '../../src/db/wait.js';
import { StartupError } from '../../src/startup-error.js';
import { uploadFile } from '../helpers/client.js';
import { createPrivatePostgres, describeWithPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import { freePort } from '../helpers/ports.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !configVariables.includes(name)));

interface Run {
  /** Parsed JSON log lines, as they arrive. */
  logs: Record<string, any>[];
  stderr: () => string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  /** Resolves with the first log line that has this msg. */
  logged(msg: string): Promise<Record<string, any>>;
  kill(): void;
}

function runServe(args: string[], env: Record<string, string>): Run {
  const child = spawn(process.execPath, ['bin/dropstream.js', ...args], {
    cwd: root,
    env: { ...baseEnv, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, any>[] = [];
  const waiting: { msg: string; resolve(line: Record<string, any>): void }[] = [];
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: Record<string, any>;
    try {
      line = JSON.parse(text);
    } catch {
      line = { msg: text };
    }
    logs.push(line);
    for (const w of waiting.filter((w) => w.msg === line.msg)) w.resolve(line);
  });
  const exited = once(child, 'close').then(([code]) => code as number | null);
  return {
    logs,
    stderr: () => stderr,
    exited,
    logged: (msg) =>
      new Promise((resolve, reject) => {
        const found = logs.find((line) => line.msg === msg);
        if (found) return resolve(found);
        waiting.push({ msg, resolve });
        exited.then((code) => reject(new Error(`exited with ${code} before logging "${msg}": ${stderr}`)));
      }),
    kill: () => child.kill('SIGKILL'),
  };
}

/** Stderr as the operator reads it: one `dropstream: ...` line, no stack trace. */
function oneLine(stderr: string): string {
  expect(stderr, 'stderr').to.match(/^dropstream: [^\n]+\n$/);
  expect(stderr).to.not.match(/\n\s+at /);
  return stderr.trim();
}

describe('start: the database is not reachable (yet)', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-start-'));
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  it('when nothing listens on the database port, then it retries with back-off, one log line per attempt, and exits 1 with one clear line', async function () {
    this.timeout(20_000);
    const port = await freePort();
    const started = Date.now();
    const run = runServe(['serve'], {
      DATA_DIR: dataDir,
      DATABASE_URL: `postgresql://postgres:secret-password@127.0.0.1:${port}/dropstream`,
      DATABASE_CONNECT_TIMEOUT: '3',
    });
    expect(await run.exited).to.equal(1);
    const elapsed = Date.now() - started;
    expect(elapsed, 'ms until exit').to.be.within(3000, 9000);
    const retries = run.logs.filter((line) => line.msg === 'database not reachable, retrying');
    // Pauses of 0.5 s, 1 s, then 2 s cut to the time left; the fourth attempt
    // finds the time up (a third only if the first attempts were slow).
    expect(retries.map((line) => line.attempt)).to.deep.equal([1, 2, 3].slice(0, retries.length));
    expect(retries.length).to.be.within(2, 3);
    const pauses = retries.map((line) => line.retry_in_ms as number);
    expect(pauses.slice(0, 2)).to.deep.equal([500, 1000]);
    if (pauses[2] !== undefined) expect(pauses[2]).to.be.within(1, 2000);
    for (const line of retries) {
      expect(line.level).to.equal(40);
      expect(line.database).to.equal(`127.0.0.1:${port}/dropstream`);
      expect(line.reason).to.include(`127.0.0.1:${port}`);
    }
    const message = oneLine(run.stderr());
    expect(message).to.include(`database at 127.0.0.1:${port}/dropstream not reachable after 3 s (${retries.length + 1} attempts)`);
    expect(message).to.include('DATABASE_CONNECT_TIMEOUT');
    expect(JSON.stringify(run.logs) + message).to.not.include('secret-password');
  });

  it('when DATABASE_CONNECT_TIMEOUT is 0, then it tries once and exits at once', async function () {
    const run = runServe(['serve'], { DATA_DIR: dataDir, DATABASE_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/x`, DATABASE_CONNECT_TIMEOUT: '0' });
    expect(await run.exited).to.equal(1);
    expect(run.logs.filter((line) => line.msg === 'database not reachable, retrying')).to.be.empty;
    expect(oneLine(run.stderr())).to.match(/not reachable after 0 s \(1 attempt\)/);
  });

  it('when `dropstream migrate` meets a closed port, then it retries the same way and exits 1 with the same line', async function () {
    this.timeout(15_000);
    const port = await freePort();
    const run = runServe(['migrate'], { DATA_DIR: dataDir, DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/x`, DATABASE_CONNECT_TIMEOUT: '1' });
    expect(await run.exited).to.equal(1);
    const lines = run.stderr().trim().split('\n');
    expect(lines.slice(0, -1)).to.have.length.at.least(1);
    for (const line of lines.slice(0, -1)) expect(line).to.match(/^dropstream: database at 127\.0\.0\.1:\d+\/x not reachable \(attempt \d+: .+\), retrying in \d+ ms$/);
    expect(lines.at(-1)).to.match(/^dropstream: database at 127\.0\.0\.1:\d+\/x not reachable after 1 s/);
    expect(run.logs).to.be.empty;
  });

  describeWithPrivatePostgres('with a private PostgreSQL that starts late', () => {
    let pg: PrivatePostgres;
    before(function () {
      this.timeout(60_000);
      pg = createPrivatePostgres();
      pg.stop();
    });
    after(() => pg?.destroy());

    it('when PostgreSQL comes up while the server waits, then it migrates, listens and serves', async function () {
      this.timeout(60_000);
      const run = runServe(['serve'], { DATA_DIR: dataDir, DATABASE_URL: pg.url, DATABASE_CONNECT_TIMEOUT: '45', ADMIN_TOKEN: 'late-postgres-admin-token-0123456789' });
      try {
        const first = await run.logged('database not reachable, retrying');
        expect(first.attempt).to.equal(1);
        pg.start();
        const listening = await run.logged('dropstream listening');
        expect(run.logs.find((line) => line.msg === 'applied migrations')?.migrations).to.have.length.at.least(1);
        const account = await fetch(`${listening.adminUrl}/admin/accounts`, {
          method: 'POST',
          headers: { Authorization: 'Bearer late-postgres-admin-token-0123456789', 'Content-Type': 'application/json' },
          body: JSON.stringify({ plan: 'pro' }),
        }).then((res) => res.json() as Promise<{ api_key: string }>);
        const upload = await uploadFile(listening.url, account.api_key, 'late.txt', 'the database came up late');
        expect(upload.status).to.equal(201);
        expect(await (await fetch(upload.body.public_link.replace(/^https?:\/\/[^/]+/, listening.url))).text()).to.equal('the database came up late');
      } finally {
        run.kill();
        await run.exited;
      }
    });

    // After the test above, so the cluster is up.
    it('when the database answers but refuses (no such database), then no retry: exits at once with its reason', async () => {
      const url = new URL(pg.url);
      url.pathname = '/dropstream_no_such_database';
      const started = Date.now();
      const run = runServe(['serve'], { DATA_DIR: dataDir, DATABASE_URL: url.toString(), DATABASE_CONNECT_TIMEOUT: '30' });
      expect(await run.exited).to.equal(1);
      expect(Date.now() - started).to.be.below(5000);
      expect(run.logs.filter((line) => line.msg === 'database not reachable, retrying')).to.be.empty;
      expect(oneLine(run.stderr())).to.include(`cannot use the database at 127.0.0.1:${url.port}/dropstream_no_such_database`).and.include('does not exist');
      // And what to do about it, with the address it was looked for at.
      expect(oneLine(run.stderr())).to.match(new RegExp(`; create it: createdb -h 127\\.0\\.0\\.1 -p ${url.port} dropstream_no_such_database \\(`));
    });
  });
});

describe('start: DATA_DIR cannot be used', () => {
  it('when DATA_DIR is below a regular file, then exits 1 with one line naming the directory', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dropstream-start-'));
    try {
      await writeFile(join(dir, 'file'), 'not a directory');
      const dataDir = join(dir, 'file', 'data');
      const run = runServe(['serve'], { DATA_DIR: dataDir });
      expect(await run.exited).to.equal(1);
      // The first write may be DATA_DIR itself (the embedded database's lock beside pglite/) or a folder in it.
      expect(oneLine(run.stderr())).to.match(
        new RegExp(`^dropstream: DATA_DIR ${dataDir} cannot be made: ${join(dir, 'file')} is a file, not a directory \\(ENOTDIR on mkdir '${dataDir}['/][^)]*\\); set DATA_DIR to a folder elsewhere$`),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
  // Not writable by the server's uid (a root-owned bind mount, the image
  // running as uid 1000): the tests here run as root, which no file mode
  // stops, so the Docker smoke test (test/docker/image.smoke.ts) shows that one.
});

describe('waitForDatabase back-off', () => {
  it('when the probe keeps failing as unreachable, then the pauses double up to the cap and the total stays within the timeout', async () => {
    const pauses: number[] = [];
    const unreachable = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const started = Date.now();
    const wait = waitForDatabase(() => Promise.reject(unreachable), {
      timeoutSeconds: 0.5,
      target: 'db:5432/x',
      firstDelayMs: 20,
      maxDelayMs: 80,
      onRetry: ({ retryInMs }) => pauses.push(retryInMs),
    });
    const err = await wait.then(() => undefined, (e: unknown) => e);
    expect(err).to.be.instanceOf(StartupError);
    expect(Date.now() - started).to.be.within(480, 700);
    expect(pauses.slice(0, 4)).to.deep.equal([20, 40, 80, 80]);
    expect(pauses.slice(4).every((ms) => ms <= 80)).to.equal(true);
  });

  it('when the probe succeeds on the third try, then it resolves after two pauses', async () => {
    let calls = 0;
    const pauses: number[] = [];
    await waitForDatabase(
      async () => {
        if (++calls < 3) throw new Error('Connection terminated unexpectedly');
      },
      { timeoutSeconds: 5, target: 'db', firstDelayMs: 10, onRetry: ({ retryInMs }) => pauses.push(retryInMs) },
    );
    expect([calls, pauses]).to.deep.equal([3, [10, 20]]);
  });

  it('when an attempt hangs (a host that drops packets), then it is given up at the deadline', async () => {
    const err = await waitForDatabase(() => new Promise(() => {}), { timeoutSeconds: 1, target: 'db', onRetry: () => {} }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.equal('database at db not reachable after 1 s (1 attempt): no answer within 1 s; DATABASE_CONNECT_TIMEOUT sets how long to wait');
  });
});
