// A real dropstream server for tests: real database (PGlite or PostgreSQL),
// real local object store in a temporary folder, both listeners on
// ephemeral loopback ports.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { createLogger, type ServerOptions } from '../../src/server.js';
import { startServer, type RunningServer } from '../../src/start.js';
import { createTestDatabase, type Backend } from './databases.js';

export const PUBLIC_URL = 'http://files.test';

export interface TestServer {
  server: RunningServer;
  backend: Backend;
  dataDir: string;
  /** Calls the admin API; throws unless 2xx. */
  admin(method: string, path: string, body?: unknown): Promise<any>;
  /** A new account on `plan` (default: the roomy test plan), with its API key. */
  account(plan?: string): Promise<{ accountId: number; apiKey: string }>;
  /** Sets (creates or updates) a plan through the admin API. */
  plan(name: string, fields: Record<string, unknown>): Promise<void>;
  /** The public-listener URL for a path, or for a public link (whose host is PUBLIC_URL). */
  url(pathOrLink: string): string;
  /** Every object file in the local store, excluding the temp folder. */
  objects(): Promise<string[]>;
  /** Files left in the store's temp folder. */
  tempFiles(): Promise<string[]>;
  close(): Promise<void>;
}

async function walk(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await walk(path)));
    else out.push(path);
  }
  return out;
}

/** What a test server's local store under `dataDir` holds: its objects (the temp folder excluded), and the files left in its temp folder. */
export function storeFiles(dataDir: string): { objects(): Promise<string[]>; tempFiles(): Promise<string[]> } {
  return {
    objects: async () => (await walk(join(dataDir, 'objects'))).filter((p) => !p.includes(`${join('objects', '.tmp')}`)),
    tempFiles: () => walk(join(dataDir, 'objects', '.tmp')),
  };
}

async function adminCall(server: RunningServer, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(server.adminUrl + path, {
    method,
    headers: { Authorization: `Bearer ${server.adminToken}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json: any = await res.json();
  if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A plan without practical request limits, so tests that are not about limits never meet them. */
export const ROOMY_PLAN = 'roomy';
export const ROOMY_PLAN_FIELDS = {
  api_access: true,
  requests_per_minute: 1_000_000,
  requests_per_day: 1_000_000,
  max_file_size: 5368709120,
  daily_uploads: 1_000_000,
  // Suites race many uploads from one account; the per-account cap's tests set their own plans.
  concurrent_uploads: 100_000,
};

/** A test server's settings: a new DATA_DIR, a PostgreSQL database of its own unless env names one, silent logs; cleanUp() removes both. */
export async function prepareTestServer(backend: Backend, env: Record<string, string> = {}, logger?: Logger) {
  // TEST_DATA_ROOT: where CI puts test servers' data (a tmpfs, .ci/run), so
  // the local store's fsyncs, each one real on a disk, do not set CI's pace.
  const dataDir = await mkdtemp(join(process.env.TEST_DATA_ROOT || tmpdir(), 'dropstream-test-'));
  // A given DATABASE_URL is shared (two instances, one database); otherwise each server gets its own.
  const database = backend === 'postgresql' && !env.DATABASE_URL ? await createTestDatabase() : undefined;
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    ADMIN_PORT: '0',
    DATA_DIR: dataDir,
    PUBLIC_URL,
    // TEST_LOG_LEVEL=error shows a server's errors while looking into a failure.
    LOG_LEVEL: process.env.TEST_LOG_LEVEL || 'silent',
    // Suites share a server and an address; the limit tests set their own.
    AUTH_FAILURE_LIMIT: '10000',
    LINK_FAILURE_LIMIT: '10000',
    // A test's close() does not wait for the idle keep-alive connections of
    // its fetch() calls (undici keeps them 4 s); the drain's tests set their own.
    SHUTDOWN_IDLE_WAIT: '0',
    ...(database ? { DATABASE_URL: database.url } : {}),
    ...env,
  });
  return {
    config,
    dataDir,
    logger: logger ?? createLogger(config.logLevel, config.logFormat),
    async cleanUp() {
      await database?.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export async function startTestServer(backend: Backend, env: Record<string, string> = {}, logger?: Logger, options?: ServerOptions): Promise<TestServer> {
  const { config, dataDir, logger: log, cleanUp } = await prepareTestServer(backend, env, logger);
  const server = await startServer(config, log, options).catch(async (err: unknown) => {
    await cleanUp();
    throw err;
  });
  await adminCall(server, 'PUT', `/admin/plans/${ROOMY_PLAN}`, ROOMY_PLAN_FIELDS);

  const admin = (method: string, path: string, body?: unknown) => adminCall(server, method, path, body);

  return {
    server,
    backend,
    dataDir,
    admin,
    async account(plan = ROOMY_PLAN) {
      const res = await admin('POST', '/admin/accounts', { plan });
      return { accountId: res.account_id, apiKey: res.api_key };
    },
    async plan(name, fields) {
      await admin('PUT', `/admin/plans/${name}`, fields);
    },
    url: (pathOrLink) => server.url + (pathOrLink.startsWith(PUBLIC_URL) ? pathOrLink.slice(PUBLIC_URL.length) : pathOrLink),
    ...storeFiles(dataDir),
    async close() {
      await server.close();
      await cleanUp();
    },
  };
}

/** Two servers on one new PostgreSQL database (each with its own settings on top of DATABASE_URL); close() stops both and drops it. */
export async function startTwoInstances(
  envA: Record<string, string> = {},
  envB: Record<string, string> = envA,
  options?: ServerOptions,
): Promise<{ a: TestServer; b: TestServer; close(): Promise<void> }> {
  const db = await createTestDatabase();
  const a = await startTestServer('postgresql', { ...envA, DATABASE_URL: db.url }, undefined, options);
  const b = await startTestServer('postgresql', { ...envB, DATABASE_URL: db.url }, undefined, options);
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await db.drop();
    },
  };
}
