// Our service as the benchmark runs it: `node bin/dropstream.js serve` (the
// compiled build) with the environment the README documents, PostgreSQL in a
// database of its own, Redis under a key prefix of its own, and one account
// on a plan whose limits are too high to ever answer 429 or 403.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { start, type Proc } from './proc.js';

const exec = promisify(execFile);

export const PG = { host: '127.0.0.1', port: 5432, user: 'postgres' };
/** The Redis the benches use; BENCH_REDIS_URL names another (a private one keeps other clients' reads out of bench/roundtrips.ts). */
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A new, empty PostgreSQL database; drop() removes it. */
export async function createDatabase(): Promise<BenchDatabase> {
  const name = `dropstream_bench_${process.pid}_${Date.now().toString(36)}`;
  const args = ['-h', PG.host, '-p', String(PG.port), '-U', PG.user];
  await exec('createdb', [...args, name]);
  return {
    name,
    url: `postgresql://${PG.user}@${PG.host}:${PG.port}/${name}`,
    drop: async () => void (await exec('dropdb', [...args, '--force', '--if-exists', name])),
  };
}

/**
 * The allocator settings `dropstream serve` (bin/dropstream.js) and the Docker
 * image use: glibc returns freed part buffers to the system at once
 * (docs/performance.md, Memory).
 */
export const MALLOC_ENV = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '65536' };

/** This process's environment without what would change how a child Node runs. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  return env;
}

/**
 * Applies migrations in a process of its own. `serve` would do it too, but
 * the schema engine (WebAssembly) would then count in the server's peak RSS
 * (~30 MiB), which is not what a running server costs.
 */
export async function migrate(databaseUrl: string, entry = 'bin/dropstream.js'): Promise<void> {
  await exec(process.execPath, [entry, 'migrate'], { env: { ...cleanEnv(), DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' } });
}

export interface DropstreamOptions {
  name: string;
  databaseUrl: string;
  dataDir: string;
  redisKeyPrefix: string;
  /** Absent: the local store under dataDir/objects. */
  s3?: { endpoint: string; bucket: string };
  /** Extra node flags, e.g. --cpu-prof. */
  nodeFlags?: string[];
  /** Overrides (S3_PART_SIZE, ...); the driver's own environment is passed through too. */
  env?: Record<string, string>;
  /** The CLI to run `serve` with; default bin/dropstream.js (bench/compare-builds.ts runs saved builds). */
  entry?: string;
  /**
   * Leave the benchmark account (two admin API requests) until `account()`
   * is called, so an idle reading after start follows no request at all.
   */
  deferAccount?: boolean;
}

export interface Dropstream {
  proc: Proc;
  url: string;
  adminUrl: string;
  adminToken: string;
  /** Peak RSS right after start, before any request. */
  startupPeakRss: number;
  /** API key of the benchmark account ("" until `account()` has made it, with deferAccount). */
  apiKey: string;
  /** Makes the benchmark account if it is not made yet (sets apiKey). */
  account(): Promise<void>;
}

export async function startDropstream(options: DropstreamOptions): Promise<Dropstream> {
  const adminToken = randomBytes(24).toString('hex');
  const env: NodeJS.ProcessEnv = {
    ...MALLOC_ENV,
    ...cleanEnv(),
    DATABASE_URL: options.databaseUrl,
    REDIS_URL: REDIS_URL,
    REDIS_KEY_PREFIX: options.redisKeyPrefix,
    DATA_DIR: options.dataDir,
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_PORT: '0',
    ADMIN_TOKEN: adminToken,
    ...(options.s3
      ? {
          S3_ENDPOINT: options.s3.endpoint,
          S3_BUCKET: options.s3.bucket,
          S3_ACCESS_KEY_ID: 'S3RVER',
          S3_SECRET_ACCESS_KEY: 'S3RVER',
          S3_FORCE_PATH_STYLE: 'true',
        }
      : {}),
    ...options.env,
  };
  const { proc, ready } = await start({
    name: options.name,
    args: [...(options.nodeFlags ?? []), options.entry ?? 'bin/dropstream.js', 'serve'],
    env,
    ready: (line) => line.msg === 'dropstream listening',
  });
  const startupPeakRss = await proc.peakRss();
  const server = { proc, url: String(ready.url), adminUrl: String(ready.adminUrl), adminToken, startupPeakRss };
  const started: Dropstream = {
    ...server,
    apiKey: '',
    account: async () => {
      if (!started.apiKey) started.apiKey = await benchAccount(server);
    },
  };
  if (!options.deferAccount) await started.account();
  return started;
}

/** Calls the admin API; throws unless 2xx. */
export async function admin(server: { adminUrl: string; adminToken: string }, method: string, path: string, body: unknown) {
  const res = await fetch(`${server.adminUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${server.adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A plan no benchmark can exhaust, and an account on it (idempotent for the plan). */
async function benchAccount(server: { adminUrl: string; adminToken: string }): Promise<string> {
  const max = 2_147_483_647;
  await admin(server, 'PUT', '/admin/plans/bench', {
    api_access: true,
    requests_per_minute: max,
    requests_per_day: max,
    max_file_size: 64 * 1024 ** 3,
    daily_uploads: max,
    concurrent_uploads: 100_000,
  });
  const created = await admin(server, 'POST', '/admin/accounts', { plan: 'bench' });
  return String(created.api_key);
}

export const auth = (server: Dropstream) => ({ Authorization: `Bearer ${server.apiKey}` });

/** Size and strong ETag of a stored file, from HEAD on its public link (answered from the database). */
export async function headDownload(server: Dropstream, publicLink: string): Promise<{ size: number; etag: string | null }> {
  const res = await fetch(`${server.url}${new URL(publicLink).pathname}`, { method: 'HEAD' });
  return { size: Number(res.headers.get('content-length')), etag: res.headers.get('etag') };
}

export async function deleteFile(server: Dropstream, fileId: number): Promise<void> {
  const res = await fetch(`${server.url}/api/v1/files/${fileId}`, { method: 'DELETE', headers: auth(server) });
  if (!res.ok) throw new Error(`DELETE /files/${fileId}: ${res.status}`);
}
