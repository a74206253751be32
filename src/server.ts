// The composition root: config in, running listeners out. Only this module
// builds objects; everything else receives what it needs.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { pino, type DestinationStream, type Logger } from 'pino';
import { CallerCache } from './accounts/caller-cache.js';
import { applyCallerChange, CallerChanges } from './accounts/caller-changes.js';
import { PlanService } from './accounts/plans.js';
import { AccountService } from './accounts/service.js';
import { resolveAdminToken } from './admin-token.js';
import { createAdminApp, createApp, type Readiness } from './app.js';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/client.js';
import { describeDatabase, waitForDatabase } from './db/wait.js';
import { recountFiles } from './files/file-rows.js';
import { UploadQuota } from './files/quota.js';
import { PendingObjects } from './files/pending.js';
import { ResumableUploads } from './files/resumable.js';
import { FileService } from './files/service.js';
import { Sweeper } from './files/sweeper.js';
import { UploadGate } from './files/upload-gate.js';
import { FailureLimits } from './limits/failure-limits.js';
import { connectRedis, redisReady, subscribeRedis } from './limits/redis.js';
import { RequestLimits } from './limits/request-limits.js';
import { createListener, drain, listen } from './listener.js';
import { Metrics } from './metrics.js';
import { LocalObjectStore } from './storage/local.js';
import { ObjectStoreError, type ObjectStore } from './storage/object-store.js';
import { S3ObjectStore } from './storage/s3.js';

export interface RunningServer {
  /** Address of the public listener (the port is real when config asked for 0). */
  url: string;
  adminUrl: string;
  adminToken: string;
  db: Database;
  metrics: Metrics;
  /**
   * Graceful shutdown: stop accepting, let requests in progress finish for
   * up to SHUTDOWN_TIMEOUT (or `timeoutSeconds`), cut the rest (their
   * uploads are aborted and cleaned up), then close store, Redis, database.
   */
  close(timeoutSeconds?: number): Promise<void>;
}

/** How long an API key's account and plan are trusted without a change notice. */
const CALLER_CACHE_MS = 1000;

/**
 * JSON lines on stdout, written asynchronously in batches (4 KiB, or every
 * 250 ms when traffic is light); close() flushes them, and pino flushes
 * synchronously on exit. Measured per request log line (one per event-loop
 * turn, CPU of the whole process): 9.8-12.0 us with the former wildcard
 * redaction and a synchronous write per line, 3.0-3.3 us now. Secrets are
 * kept out of logs by never passing them to a log call (no request headers,
 * bodies or URLs are logged), which a test checks at trace level.
 */
export function createLogger(level: Config['logLevel'], format: Config['logFormat'] = 'json', destination?: DestinationStream): Logger {
  if (format === 'pretty') return pino({ level, base: undefined, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } });
  return pino({ level, base: undefined }, destination ?? pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 250 }));
}

/** Writes out what the logger still holds. */
const flushLog = (logger: Logger) => new Promise<void>((resolve) => logger.flush(() => resolve()));

async function checkReadiness(db: Database, store: ObjectStore, redis: Redis | undefined): Promise<Readiness> {
  const probe = (work: Promise<unknown>) =>
    Promise.race([work.then(() => 'ok' as const), new Promise<'down'>((r) => setTimeout(() => r('down'), 2000).unref())]).catch(
      () => 'down' as const,
    );
  const [database, objects] = await Promise.all([probe(db.prisma.$queryRawUnsafe('SELECT 1')), probe(store.head('readyz-probe'))]);
  const checks: Readiness['checks'] = {
    database,
    store: objects,
    redis: redis ? (redisReady(redis) ? 'ok' : 'degraded') : 'off',
  };
  return { ready: database === 'ok' && objects === 'ok', checks };
}

/** The store, and how long a multipart upload may live in it (seconds), when a lifecycle rule says. */
async function openStore(config: Config, logger: Logger): Promise<{ store: ObjectStore; uploadLifetime?: number }> {
  if (!config.s3) return { store: new LocalObjectStore({ root: join(config.dataDir, 'objects') }) };
  const store = new S3ObjectStore(config.s3);
  await store.ensureBucket();
  // Which backstops remove multipart uploads nobody finished (README, Objects in S3).
  const expiry = await store.ensureUploadExpiry();
  const sweep = config.gcInterval > 0 ? `the sweep every ${config.gcInterval} s` : 'only `dropstream gc` (GC_INTERVAL is 0)';
  if (expiry.rule === 'none') {
    logger.info({ lifecycle_rule: 'none', reason: expiry.reason }, `incomplete multipart uploads: no bucket lifecycle rule (${expiry.reason}); ${sweep} aborts those unclaimed after GC_GRACE`);
  } else {
    logger.info({ lifecycle_rule: expiry.rule, days: expiry.days }, `incomplete multipart uploads: the bucket's lifecycle rule aborts them after ${expiry.days} days, and ${sweep} aborts those unclaimed after GC_GRACE`);
  }
  return { store, uploadLifetime: expiry.rule === 'none' ? undefined : expiry.days * 86_400 };
}

export async function startServer(config: Config, logger = createLogger(config.logLevel, config.logFormat)): Promise<RunningServer> {
  let redis: Redis | undefined;
  let subscriber: Redis | undefined;
  const db = await openDatabase({ url: config.databaseUrl, pgliteDir: config.databaseUrl ? undefined : join(config.dataDir, 'pglite') });
  try {
    if (config.databaseUrl) {
      const target = describeDatabase(config.databaseUrl);
      await waitForDatabase(() => db.prisma.$queryRawUnsafe('SELECT 1'), {
        timeoutSeconds: config.databaseConnectTimeout,
        target,
        onRetry: ({ attempt, reason, retryInMs }) =>
          logger.warn({ attempt, database: target, reason, retry_in_ms: retryInMs }, 'database not reachable, retrying'),
      });
    }
    const applied = await db.migrate();
    if (applied.length) logger.info({ migrations: applied }, 'applied migrations');
    const { store, uploadLifetime } = await openStore(config, logger);
    const uploadGate = new UploadGate(config.uploadConcurrency);
    const metrics = new Metrics(() => uploadGate.inFlight);
    const onCleanupError = (err: unknown) => {
      if (err instanceof ObjectStoreError) metrics.storeErrors.inc();
      logger.error({ err }, 'clean-up failed');
    };
    redis = config.redisUrl ? connectRedis(config.redisUrl, logger) : undefined;
    // Callers of API keys are cached for a second; changes reach every
    // instance's cache at once through Redis pub/sub (the TTL bounds
    // staleness when a notice is lost).
    const callers = new CallerCache({ ttlMs: CALLER_CACHE_MS, maxEntries: 10_000 });
    const channel = `${config.redisKeyPrefix}:caller-changes`;
    const changes = new CallerChanges(callers, redis && { publisher: redis, channel, logger });
    subscriber = config.redisUrl
      ? subscribeRedis(config.redisUrl, channel, (message) => applyCallerChange(callers, message), () => callers.clear())
      : undefined;
    const accounts = new AccountService(db.prisma, { cache: callers, changes });
    const plans = new PlanService(db.prisma, { maxFileSize: store.maxObjectSize }, changes);
    const quota = new UploadQuota(db.prisma);
    const pending = new PendingObjects(db.prisma, quota);
    const files = new FileService({ prisma: db.prisma, store, quota, pending, onCleanupError });
    const resumable = new ResumableUploads({ prisma: db.prisma, store, quota, expirySeconds: config.resumableExpiry, lifetimeSeconds: uploadLifetime, onCleanupError });
    const sweeper = new Sweeper(db.prisma, store, quota, resumable);
    const sweep = async (graceSeconds = config.gcGrace) => {
      const result = await sweeper.sweep(graceSeconds);
      if (result.uploads || result.deletes || result.strays || result.failed) logger.info({ ...result }, 'swept pending objects');
      return result;
    };
    const adminToken = await resolveAdminToken(config.adminToken, config.dataDir);

    const authFailures = new FailureLimits({ redis, keyPrefix: config.redisKeyPrefix, name: 'auth', failures: config.authFailureLimit, windowSeconds: 60 });
    const app = createApp({
      accounts,
      files,
      resumable,
      store,
      uploadGate,
      requestLimits: new RequestLimits({ redis, keyPrefix: config.redisKeyPrefix, failures: authFailures }),
      authFailures,
      tokenFailures: new FailureLimits({ redis, keyPrefix: config.redisKeyPrefix, name: 'link', failures: config.linkFailureLimit, windowSeconds: 60 }),
      metrics,
      logger,
      publicUrl: config.publicUrl,
      trustProxy: config.trustProxy,
      corsOrigins: config.corsOrigins,
      // While draining, load balancers must stop sending traffic here.
      readiness: async () => (draining ? { ready: false, checks: { shutdown: 'down' } } : checkReadiness(db, store, redis)),
    });
    // `dropstream gc` also recounts the file counters; the schedule does not
    // (a scan of every file row, and the counters are kept exact as files come and go).
    const collect = async (graceSeconds?: number) => {
      const swept = await sweep(graceSeconds);
      const countersFixed = await recountFiles(db.prisma);
      if (countersFixed) logger.warn({ accounts: countersFixed }, 'corrected file counters');
      return { ...swept, countersFixed };
    };
    const adminApp = createAdminApp({ accounts, plans, logger, adminToken, metrics, sweep: collect });
    const sweepTimer =
      config.gcInterval > 0
        ? setInterval(() => sweep().catch((err: unknown) => logger.warn({ err }, 'sweep failed')), config.gcInterval * 1000).unref()
        : undefined;
    const timeouts = { headersSeconds: config.headersTimeout, idleSeconds: config.idleTimeout };
    const server = createListener(app.callback(), timeouts);
    const adminServer = createListener(adminApp.callback(), timeouts);
    const url = await listen(server, config.port, config.host);
    const adminUrl = await listen(adminServer, config.adminPort, config.adminHost);
    logger.info(
      { url, adminUrl, database: db.kind, store: config.s3 ? 's3' : 'local', publicUrl: config.publicUrl },
      'dropstream listening',
    );

    let draining = false;
    let closing: Promise<void> | undefined;
    return {
      url,
      adminUrl,
      adminToken,
      db,
      metrics,
      close(timeoutSeconds = config.shutdownTimeout) {
        // Once: a second call (a second signal, a test's clean-up) waits for the first.
        closing ??= (async () => {
          draining = true;
          clearInterval(sweepTimer);
          const [cut] = await Promise.all([drain(server, timeoutSeconds * 1000), drain(adminServer, timeoutSeconds * 1000)]);
          // Cut uploads clean up after themselves (abort, delete, give back the
          // quota slot); that needs the store and the database still open.
          for (let waited = 0; uploadGate.inFlight > 0 && waited < 10_000; waited += 20) await sleep(20);
          logger.info({ cut_connections: cut, uploads_left: uploadGate.inFlight }, 'stopped');
          await store.close?.();
          redis?.disconnect();
          subscriber?.disconnect();
          await db.close();
          await flushLog(logger);
        })();
        return closing;
      },
    };
  } catch (err) {
    redis?.disconnect();
    subscriber?.disconnect();
    await db.close();
    throw err;
  }
}
