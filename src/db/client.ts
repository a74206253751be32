// Builds the Prisma client for one of the two backends: PostgreSQL when a URL
// is given, otherwise PGlite (PostgreSQL compiled to WebAssembly) in a folder,
// or in memory for tests. Both run the same schema and migrations. Each
// backend's driver is imported when it is opened, so a server loads one.
import { dirname } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import { PrismaClient } from '../generated/prisma/client.js';
import { makeDir } from '../make-dir.js';
import { StartupError } from '../startup-error.js';
import { lockDataDir } from './data-dir-lock.js';
import { applyMigrations } from './migrate.js';
import { pendingMigrations } from './pending-migrations.js';
import { keepWasmOnBaselineTier } from './wasm-tiering.js';

export type { PrismaClient };

export interface DatabaseOptions {
  /** `postgresql://` URL. When absent, PGlite is used. It may go through a connection pooler in transaction mode. */
  url?: string;
  /**
   * PostgreSQL only: a URL where a connection is a session of its own
   * (PostgreSQL itself, or a pooler in session mode), for what needs one:
   * migrations' lock. Absent: `url`, if it keeps sessions (asked once).
   */
  directUrl?: string;
  /**
   * Folder for PGlite's files; absent means in memory (tests). Only one
   * process may open it: `<folder>.lock` is held while it is open, and a
   * second opener gets DataDirLockedError.
   */
  pgliteDir?: string;
  /**
   * PostgreSQL only: the longest any statement may run or wait for a lock,
   * and for a pooled connection (see `poolDeadlines`). Absent: no deadline.
   */
  queryTimeoutMs?: number;
}

export interface Database {
  prisma: PrismaClient;
  /** Which backend this is, for logs and readiness. */
  kind: 'postgresql' | 'pglite';
  /**
   * Where a connection is a session of its own (for migrations' lock and
   * the notice carrier's LISTEN): the direct URL, else the URL when it keeps
   * sessions (asked of the server once), else undefined (behind a pooler;
   * always for PGlite). A failure to ask is thrown, and asked again next time.
   */
  sessionUrl(): Promise<string | undefined>;
  /** Applies pending migrations; returns the names applied. Refused (StartupError) on PostgreSQL without a session URL. */
  migrate(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * PGlite's own defaults plus a smaller buffer pool. PostgreSQL's default
 * `shared_buffers=128MB` is sized for a server process of its own; here the
 * pool lives inside our process's WebAssembly memory, and our tables are
 * small and hot (accounts, keys, plans, file rows). 16 MB measured 100-120 MiB
 * less idle RSS (bench/embedded-footprint.ts).
 */
const PGLITE_SHARED_BUFFERS = ['-c', 'shared_buffers=16MB'];

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  let factory: SqlMigrationAwareDriverAdapterFactory;
  let migrationFactory: (() => Promise<SqlMigrationAwareDriverAdapterFactory>) | undefined;
  let sessionUrl: () => Promise<string | undefined> = async () => undefined;
  let closeDriver: () => Promise<void>;
  if (options.url) {
    const url = options.url;
    const [{ PrismaPg }, { clientWithDeadlines }] = await Promise.all([import('@prisma/adapter-pg'), import('./deadlines.js')]);
    factory = new PrismaPg({ connectionString: url, ...poolDeadlines(options.queryTimeoutMs, clientWithDeadlines) });
    sessionUrl = sessionUrlOf(url, options.directUrl, options.queryTimeoutMs);
    // Migrations keep no statement deadline: an index built over a large
    // table may rightly take minutes. Connecting is still bounded.
    migrationFactory = async () => {
      const direct = await sessionUrl();
      if (!direct) throw new StartupError(MIGRATIONS_NEED_A_SESSION);
      return new PrismaPg({ connectionString: direct, ...connectDeadlines(options.queryTimeoutMs) });
    };
    closeDriver = async () => {};
  } else {
    const [{ PGlite }, { PrismaPGlite }] = await Promise.all([import('@electric-sql/pglite'), import('pglite-prisma-adapter')]);
    const lock = options.pgliteDir ? await lockAndSeed(options.pgliteDir) : undefined;
    keepWasmOnBaselineTier();
    let pglite: PGlite;
    try {
      pglite = await PGlite.create(options.pgliteDir, { startParams: [...PGlite.defaultStartParams, ...PGLITE_SHARED_BUFFERS] });
    } catch (err) {
      await lock?.release();
      throw err;
    }
    factory = new PrismaPGlite(pglite);
    closeDriver = async () => {
      try {
        await pglite.close();
      } finally {
        await lock?.release();
      }
    };
  }
  // 'minimal': without it Prisma captures a stack trace (new Error()) on every
  // query, to point its error messages at the calling line; our errors are
  // logged with their own stack. Measured: ~4% of the server's CPU under load.
  const prisma = new PrismaClient({ adapter: factory, errorFormat: 'minimal' });
  return {
    prisma,
    kind: options.url ? 'postgresql' : 'pglite',
    sessionUrl,
    migrate: async () => ((await pendingMigrations(prisma)).length ? applyMigrations(migrationFactory ? await migrationFactory() : factory) : []),
    async close() {
      await prisma.$disconnect();
      await closeDriver();
    },
  };
}

/** How much longer than the server's own deadline we wait for its answer before giving the connection up. */
const ANSWER_MARGIN_MS = 5000;

/** Why a server behind a pooler, with no direct URL, does not migrate. */
const MIGRATIONS_NEED_A_SESSION =
  'migrations are pending, and DATABASE_URL goes through a connection pooler that does not keep sessions (it refused or dropped a setting sent at connect): ' +
  "migrations take a session's advisory lock, which a pooler in transaction mode leaves held on a server connection another client gets next; " +
  'set DATABASE_DIRECT_URL to PostgreSQL itself (or to a pooler in session mode), or run `dropstream migrate` with DATABASE_URL naming PostgreSQL itself';

/**
 * The session URL, asked for once: the direct URL as given, else `url` if
 * it keeps sessions. A failed ask is not kept, so a later call asks again.
 */
function sessionUrlOf(url: string, directUrl: string | undefined, queryTimeoutMs: number | undefined): () => Promise<string | undefined> {
  if (directUrl) return async () => directUrl;
  let asked: Promise<string | undefined> | undefined;
  return () =>
    (asked ??= import('./session-probe.js')
      .then(({ keepsSessions }) => keepsSessions(url, queryTimeoutMs || PROBE_TIMEOUT_MS))
      .then((kept) => (kept ? url : undefined))
      .catch((err: unknown) => {
        asked = undefined;
        throw err;
      }));
}

/** How long the session probe may take when no query deadline is set. */
const PROBE_TIMEOUT_MS = 10_000;

/** Connecting is bounded, and a peer that vanished between queries is noticed (TCP keepalive). */
function connectDeadlines(ms: number | undefined) {
  return ms ? { connectionTimeoutMillis: ms, keepAlive: true, keepAliveInitialDelayMillis: 10_000 } : {};
}

/**
 * node-postgres waits forever by default: for a connection from a full pool,
 * for a server that accepted the connection and never answers, for a row
 * lock. Each gets a deadline here, so a stalled PostgreSQL costs a request
 * a 503 after `ms` instead of holding it (and its client's connection)
 * open. A statement that runs or waits past `ms` is cancelled by PostgreSQL
 * (the connection stays usable), and a transaction left idle that long is
 * ended (a replica frozen mid-transaction releases its locks): both set in
 * a way a pooler in transaction mode keeps (src/db/deadlines.ts). When no
 * answer comes at all (the server or the network hung), the driver gives up
 * `ANSWER_MARGIN_MS` later, and the pool drops that connection.
 */
function poolDeadlines(ms: number | undefined, clientWithDeadlines: typeof import('./deadlines.js').clientWithDeadlines) {
  if (!ms) return {};
  const Client = clientWithDeadlines({ statementMs: ms, cancelMs: ANSWER_MARGIN_MS }) as unknown as new () => import('pg').ClientBase;
  return { ...connectDeadlines(ms), query_timeout: ms + ANSWER_MARGIN_MS, Client };
}

/** Takes the folder's lock, then makes sure it holds a database (a copy of the template if it is new). */
async function lockAndSeed(dir: string) {
  await makeDir(dirname(dir));
  const lock = await lockDataDir(dir);
  try {
    const { seedFromTemplate } = await import('./pglite-template.js');
    if (!(await seedFromTemplate(dir))) await makeDir(dir);
  } catch (err) {
    await lock.release();
    throw err;
  }
  return lock;
}
