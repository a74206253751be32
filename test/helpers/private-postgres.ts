// A PostgreSQL cluster of the test's own (initdb + pg_ctl from the Debian
// packages), so a test can stop and start the database without touching the
// machine's shared server.
//
// The binaries are looked up where the system keeps them, not on PATH: Debian
// puts initdb and pg_ctl in /usr/lib/postgresql/<version>/bin and runuser in
// /usr/sbin, neither of which a user's PATH (or `npm test` under a short one)
// need hold. Where PostgreSQL is not installed, the suites that need a cluster
// are left out and named in the "Did not run" summary (issue 37):
// describeWithPrivatePostgres().
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { notRun } from './not-run.js';

const POSTGRES_LIB = '/usr/lib/postgresql';

/** The newest installed PostgreSQL's bin folder that has initdb and pg_ctl, if any. */
function findPostgresBin(): string | undefined {
  const versions = existsSync(POSTGRES_LIB) ? readdirSync(POSTGRES_LIB) : [];
  // Numeric order: "9.6" < "15" < "17".
  versions.sort((a, b) => parseFloat(a) - parseFloat(b));
  return versions
    .map((version) => join(POSTGRES_LIB, version, 'bin'))
    .reverse()
    .find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')));
}

/** A command on PATH or in the system folders PATH may leave out. */
function findCommand(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  return dirs.map((dir) => join(dir, name)).find((path) => existsSync(path));
}

const isRoot = process.getuid?.() === 0;

/**
 * How to run PostgreSQL's programs, or why it cannot be done here. initdb
 * refuses to run as root, so root runs them as the postgres user (runuser);
 * anyone else runs them as themselves.
 */
function locate(): { bin: string; runuser?: string } | { missing: string } {
  const bin = findPostgresBin();
  if (!bin) return { missing: `PostgreSQL is not installed (no initdb and pg_ctl under ${POSTGRES_LIB}/*/bin)` };
  if (!isRoot) return { bin };
  const runuser = findCommand('runuser');
  if (!runuser) return { missing: 'runuser was not found (on PATH, /usr/sbin or /sbin) to run initdb as the postgres user' };
  return { bin, runuser };
}

const located = locate();

/**
 * `describe(title, fn)` where a private cluster can be started; elsewhere the
 * suite is left out and named in the "Did not run" summary. CI refuses to
 * leave it out (CI=true), as it refuses to run without its services.
 */
export function describeWithPrivatePostgres(title: string, fn: (this: Mocha.Suite) => void): void {
  if (!('missing' in located)) {
    describe(title, fn);
    return;
  }
  if (process.env.CI) throw new Error(`CI must be able to start a private PostgreSQL cluster for "${title}": ${located.missing}`);
  notRun(`${located.missing}: "${title}"`, 'install PostgreSQL (Debian: apt-get install postgresql), then npm test (see docs/development.md)');
}

function run(command: string, args: string[]) {
  if ('missing' in located) throw new Error(located.missing);
  const program = join(located.bin, command);
  if (located.runuser) execFileSync(located.runuser, ['-u', 'postgres', '--', program, ...args], { stdio: 'ignore' });
  else execFileSync(program, args, { stdio: 'ignore' });
}

export interface PrivatePostgres {
  url: string;
  start(): void;
  /** Stops at once, as a crash or a network cut would look to clients. */
  stop(): void;
  destroy(): void;
}

/** `settings` are server settings (`-c name=value`), e.g. `{ shared_preload_libraries: 'pg_stat_statements' }`. */
export function createPrivatePostgres(settings: Record<string, string> = {}): PrivatePostgres {
  const root = mkdtempSync(join(tmpdir(), 'dropstream-pg-'));
  if (!('missing' in located) && located.runuser) {
    const id = (flag: string) => Number(execFileSync(findCommand('id') ?? 'id', [flag, 'postgres']).toString());
    chownSync(root, id('-u'), id('-g'));
  }
  const data = join(root, 'data');
  // Below the ephemeral range (32768-60999 here), where a client socket of any process may hold a port.
  const port = 20000 + Math.floor(Math.random() * 12000);
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres']);
  const pgCtl = (...args: string[]) => run('pg_ctl', ['-D', data, ...args]);
  const extra = Object.entries(settings).map(([k, v]) => ` -c ${k}=${v}`).join('');
  const cluster = {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    start: () => pgCtl('-o', `-p ${port} -k ${root} -c listen_addresses=127.0.0.1${extra}`, '-l', join(root, 'log'), '-w', 'start'),
    stop: () => pgCtl('-m', 'immediate', '-w', 'stop'),
    destroy() {
      try {
        cluster.stop();
      } catch {}
      rmSync(root, { recursive: true, force: true });
    },
  };
  cluster.start();
  return cluster;
}
