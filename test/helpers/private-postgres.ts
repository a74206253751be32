// A PostgreSQL cluster of the test's own (initdb + pg_ctl from the Debian
// packages, run as the postgres user), so a test can stop and start the
// database without touching the machine's shared server.
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const bin = (name: string) => {
  const version = readdirSync('/usr/lib/postgresql').sort().at(-1);
  return `/usr/lib/postgresql/${version}/bin/${name}`;
};

const asPostgres = (command: string, args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', bin(command), ...args], { stdio: 'ignore' });

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
  chownSync(root, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
  const data = join(root, 'data');
  // Below the ephemeral range (32768-60999 here), where a client socket of any process may hold a port.
  const port = 20000 + Math.floor(Math.random() * 12000);
  asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres']);
  const pgCtl = (...args: string[]) => asPostgres('pg_ctl', ['-D', data, ...args]);
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
