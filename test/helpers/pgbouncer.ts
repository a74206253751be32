// A PgBouncer of the test's own (Debian's package `pgbouncer`, 1.18 on
// bookworm) in transaction mode with its default settings, in front of the
// PostgreSQL server TEST_DATABASE_URL names: a temporary config, auth file
// and port, started as a child process and stopped after (issue 58).
//
// The binary is looked up where Debian keeps it (/usr/sbin, which a user's
// PATH, or `npm test` under a short one, need not hold). PgBouncer refuses to
// run as root; as root it is started with `-u postgres`, which drops to that
// user after reading its files. Where it is not installed the suites that
// need it are named under "Did not run"; CI (CI=true) refuses to leave them
// out (.ci/clients.sh installs it).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { notRun } from './not-run.js';
import { freePort } from './ports.js';

const serverUrl = process.env.TEST_DATABASE_URL;

function findPgBouncer(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  return dirs.map((dir) => join(dir, 'pgbouncer')).find((path) => existsSync(path));
}

const binary = findPgBouncer();

/**
 * `describe(title, fn)` where PgBouncer and PostgreSQL (TEST_DATABASE_URL)
 * are there; elsewhere the suite is named in the "Did not run" summary. In
 * CI a missing PgBouncer is an error, as a missing PostgreSQL is.
 */
export function describeWithPgBouncer(title: string, fn: (this: Mocha.Suite) => void): void {
  if (!serverUrl) {
    if (process.env.CI) throw new Error('CI must set TEST_DATABASE_URL: the PostgreSQL half of the suite has to run there');
    notRun(`TEST_DATABASE_URL is not set: "${title}"`, 'TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test npm test (see docs/development.md)');
    return;
  }
  if (!binary) {
    if (process.env.CI) throw new Error(`CI must be able to start PgBouncer for "${title}": pgbouncer was not found (on PATH, /usr/sbin or /sbin); .ci/clients.sh installs it`);
    notRun(`PgBouncer is not installed: "${title}"`, 'install PgBouncer (Debian: apt-get install pgbouncer), then npm test (see docs/development.md)');
    return;
  }
  describe(title, fn);
}

export interface PgBouncer {
  /** `databaseUrl` (a database on TEST_DATABASE_URL's server) through this PgBouncer. */
  through(databaseUrl: string): string;
  /** What PgBouncer logged so far. */
  log(): string;
  stop(): Promise<void>;
}

/** Starts PgBouncer in transaction mode; `settings` are more lines of its [pgbouncer] section (none: its defaults). */
export async function startPgBouncer(settings: Record<string, string> = {}): Promise<PgBouncer> {
  if (!binary || !serverUrl) throw new Error('PgBouncer or TEST_DATABASE_URL is missing: use describeWithPgBouncer');
  const server = new URL(serverUrl);
  const dir = await mkdtemp(join(tmpdir(), 'dropstream-pgbouncer-'));
  const port = await freePort();
  const user = decodeURIComponent(server.username || 'postgres');
  // trust: the PostgreSQL behind it trusts loopback connections too (CI's and this machine's).
  await writeFile(join(dir, 'users.txt'), `"${user}" ""\n`);
  const ini = [
    '[databases]',
    // Every database name, to the same name on TEST_DATABASE_URL's server: each test server has its own.
    `* = host=${server.hostname} port=${server.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    // No Unix socket: /tmp/.s.PGSQL.<port> is shared by every process of the machine.
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    ...Object.entries(settings).map(([key, value]) => `${key} = ${value}`),
  ].join('\n');
  await writeFile(join(dir, 'pgbouncer.ini'), `${ini}\n`);
  const asRoot = process.getuid?.() === 0 ? ['-u', 'postgres'] : [];
  const child: ChildProcess = spawn(binary, [...asRoot, join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  const exited = once(child, 'exit');
  // A test process that ends without its after hook (a crash, mocha's exit) takes its PgBouncer with it.
  const orphaned = () => {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', orphaned);
  void exited.then(() => process.off('exit', orphaned));
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => {
      const check = () => /listening on 127\.0\.0\.1/.test(log) && resolve(true);
      child.stderr!.on('data', check);
    }),
    exited.then(() => false),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 10_000).unref()),
  ]);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  if (!ready) {
    await stop();
    throw new Error(`PgBouncer did not start on 127.0.0.1:${port}: ${log.trim()}`);
  }
  return {
    through(databaseUrl) {
      const url = new URL(databaseUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    log: () => log,
    stop,
  };
}
