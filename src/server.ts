// The composition root: config in, the two Koa apps and what they stand on
// out (buildServer). Only this module builds objects; everything else
// receives what it needs. Listening on ports is src/start.ts's, and tuning
// the process (V8, the allocator) is `dropstream serve`'s (src/memory/), so
// a test can build an app and drive app.callback() without either.
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import type Koa from 'koa';
import { pino, type DestinationStream, type Logger } from 'pino';
import { CallerCache } from './accounts/caller-cache.js';
import { applyCallerChange, CallerChanges } from './accounts/caller-changes.js';
import { PlanService } from './accounts/plans.js';
import { AccountService } from './accounts/service.js';
import { resolveAdminToken } from './admin-token.js';
import { secureDataDir } from './data-dir.js';
import { createAdminApp, createApp, type Readiness } from './app.js';
import type { Config } from './config.js';
import { Closers } from './closers.js';
import type { Database } from './db/client.js';
import { openReadyDatabase } from './db/open.js';
import { recountFiles } from './files/file-rows.js';
import { UploadLedger } from './ledger/ledger.js';
import { LiveDownloads } from './links/live-downloads.js';
import { LinkService } from './links/service.js';
import { ResumableRecords } from './tus/records.js';
import { ResumableUploads } from './tus/uploads.js';
import { UploadLocker } from './tus/locker.js';
import { FileService } from './files/service.js';
import { PlainUploads } from './uploads/service.js';
import { Intake } from './intake/intake.js';
import { allExpiring, Sweeper, type ExpiringUploads } from './files/sweeper.js';
import { DirectUploads } from './direct/uploads.js';
import { UploadGate } from './limits/upload-gate.js';
import { ConcurrencySlots } from './limits/concurrent-uploads.js';
import { FailureLimits } from './limits/failure-limits.js';
import { connectRedis, rateLimitsAtStart, redisReady } from './limits/redis.js';
import type { NoticeCarrier } from './notices/carrier.js';
import { openNotices } from './notices/open.js';
import { RequestLimits } from './limits/request-limits.js';
import { RequestsInFlight } from './limits/requests-in-flight.js';
import { Metrics } from './metrics.js';
import { buildInfo } from './version.js';
import { ObjectStoreError, type ObjectStore } from './storage/object-store.js';
import { openStore } from './storage/open.js';
import { StoreHealth } from './storage/store-health.js';
import { untrustedForwardLog } from './http/client-address.js';
import type { StoreCallObserver } from './storage/store-deadlines.js';
import { WebhookEndpoints } from './webhooks/endpoints.js';
import { ApiKeys } from './keys/api-keys.js';
import { LastUsed } from './accounts/last-used.js';
import { AuditTrail } from './trail/trail.js';
import { Relay, type RelayOptions } from './webhooks/relay.js';
import { FileRequests } from './requests/service.js';
import { LiveRequestUploads } from './requests/live-uploads.js';
import { RequestLinkLimits } from './limits/request-link-limits.js';
import { systemClock, type Clock } from './clock.js';

/** A server built and not listening: Fastify's `build()` and `ready()` in one. */
export interface BuiltServer {
  /** The public API; `app.callback()` serves a request without a port. */
  app: Koa;
  /** The admin API (accounts, plans, metrics), meant for a listener of its own. */
  adminApp: Koa;
  adminToken: string;
  db: Database;
  metrics: Metrics;
  /** What the start line says about the build: database, store, public URL, where rate limits are counted. */
  summary: Record<string, unknown>;
  /** Uploads in progress; a cut one counts until it has cleaned up (aborted, deleted, given its slot back). */
  uploadsInFlight(): number;
  /** The first step of a shutdown: readiness answers down (load balancers stop sending traffic) and no sweep starts. */
  drain(): void;
  /** Closes what the build opened, last opened first (relay, notices, Redis, store, database); once. */
  close(): Promise<void>;
}

/** How long a tus request's lock on an upload holds unless renewed (every third of it while the request runs); also a removal's claim. */
const TUS_LOCK_MS = 30_000;

/** How long an API key's account and plan are trusted without a change notice. */
const CALLER_CACHE_MS = 1000;

/**
 * JSON lines on stdout, written asynchronously in batches (4 KiB, or every
 * 250 ms when traffic is light): a synchronous write per line cost a request
 * three times the CPU (docs/performance.md, Logging). close() flushes them,
 * and pino flushes synchronously on exit. Secrets are kept out of logs by
 * never passing them to a log call (no request headers, bodies or URLs are
 * logged), which a test checks at trace level, rather than by redaction,
 * which pino pays for on every line.
 *
 * What waits to be written is capped at LOG_BUFFER_BYTES: a log collector
 * that stops reading stdout would otherwise grow the buffer with every
 * request until the process runs out of memory. Past the cap lines are
 * dropped and counted (dropstream_log_dropped_bytes_total).
 */
export const LOG_BUFFER_BYTES = 16 * 1024 * 1024;

export function createLogger(level: Config['logLevel'], format: Config['logFormat'] = 'json', destination?: DestinationStream): Logger {
  if (format === 'pretty') return pino({ level, base: undefined, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } });
  return pino({ level, base: undefined }, destination ?? logDestination(1));
}

/** The asynchronous, batched, capped destination createLogger writes to (fd 1: stdout). */
export function logDestination(fd: number, maxLength = LOG_BUFFER_BYTES) {
  return pino.destination({ dest: fd, sync: false, minLength: 4096, maxLength, periodicFlush: 250 });
}

/** Writes out what the logger still holds, waiting at most `ms` for a stdout nobody reads. */
export const flushLog = (logger: Logger, ms = 2_000) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms).unref();
    logger.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });

const logDestinationOf = (logger: Logger): unknown => (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];

async function checkReadiness(db: Database, store: ObjectStore, health: StoreHealth, redis: Redis | undefined): Promise<Readiness> {
  const probe = (work: Promise<unknown>) =>
    Promise.race([work.then(() => 'ok' as const), new Promise<'down'>((r) => setTimeout(() => r('down'), 2000).unref())]).catch(
      () => 'down' as const,
    );
  const [database, answered] = await Promise.all([probe(db.prisma.$queryRawUnsafe('SELECT 1')), probe(store.head('readyz-probe'))]);
  // A store that answers a HEAD may still hang writes: recent timeouts of any kind of call count too.
  const objects = answered === 'ok' && health.timingOut().length === 0 ? 'ok' : 'down';
  const checks: Readiness['checks'] = {
    database,
    store: objects,
    redis: redis ? (redisReady(redis) ? 'ok' : 'degraded') : 'off',
  };
  return { ready: database === 'ok' && objects === 'ok', checks };
}

/** Settings that are no operator's business: tests shorten timers with them. */
export interface ServerOptions {
  /** How often a streaming upload touches its pending record (src/uploads/upload.ts, a minute by default). */
  uploadHeartbeatMs?: number;
  /** How long an API key's caller is cached without a change notice (a second by default). */
  callerCacheMs?: number;
  /** The webhook relay's timers (src/webhooks/relay.ts: timeout, poll, first backoff, retry window) and its timeouts before a webhook rests. */
  webhooks?: Partial<Pick<RelayOptions, 'timeoutMs' | 'pollMs' | 'baseBackoffMs' | 'retryWindowMs' | 'endpointTimeouts'>>;
  /** The time where it decides (expiry of links, files, API keys, file requests and tus uploads; the sweep): the wall clock unless a test moves it (src/clock.ts). */
  clock?: Clock;
}

/** Objects without resources of their own that every step reports to. */
interface Instruments {
  uploadGate: UploadGate;
  metrics: Metrics;
  storeHealth: StoreHealth;
  observeStore: StoreCallObserver;
  onCleanupError: (err: unknown) => void;
}

function instruments(config: Config, logger: Logger): Instruments {
  const uploadGate = new UploadGate(config.uploadConcurrency);
  const metrics = new Metrics(() => uploadGate.inFlight);
  // Timing out counts for /readyz from the timeout until a call of that kind
  // succeeds, or three call deadlines without a new one.
  const storeHealth = new StoreHealth(3 * config.storeDeadlines.callMs);
  return {
    uploadGate,
    metrics,
    storeHealth,
    observeStore: (operation, outcome) => {
      storeHealth.observe(operation, outcome);
      if (outcome === 'timeout') {
        metrics.storeTimeouts.inc({ operation });
        logger.warn({ operation }, 'object store call timed out');
      }
    },
    onCleanupError: (err) => {
      if (err instanceof ObjectStoreError) metrics.storeErrors.inc();
      logger.error({ err }, 'clean-up failed');
    },
  };
}

/** Counts what the log destination drops when its buffer is full (createLogger). */
function countLogDrops(logger: Logger, metrics: Metrics, closers: Closers): void {
  const destination = logDestinationOf(logger);
  if (!(destination instanceof EventEmitter)) return;
  const count = (data: string) => metrics.logDroppedBytes.inc(Buffer.byteLength(data));
  destination.on('drop', count);
  closers.add('log drop counter', () => void destination.off('drop', count));
}

/** The servers a start connects to: the database (migrated), the object store, Redis when configured. */
interface Infrastructure {
  db: Database;
  store: ObjectStore;
  uploadLifetime?: number;
  redis?: Redis;
}

async function openInfrastructure(config: Config, logger: Logger, tools: Instruments, closers: Closers): Promise<Infrastructure> {
  const db = await openReadyDatabase(config, ({ attempt, reason, retryInMs, target }) =>
    logger.warn({ attempt, database: target, reason, retry_in_ms: retryInMs }, 'database not reachable, retrying'),
  );
  closers.add('database', () => db.close());
  const applied = await db.migrate();
  if (applied.length) logger.info({ migrations: applied }, 'applied migrations');
  const { store, uploadLifetime } = await openStore(config, logger, tools.observeStore);
  closers.add('object store', () => store.close?.());
  const redis = config.redisUrl ? await connectRedis(config.redisUrl, logger) : undefined;
  if (redis) closers.add('redis', () => redis.disconnect());
  return { db, store, uploadLifetime, redis };
}

/** The services the apps are built on, with the connections of their own they open (pub/sub, release notices). */
interface Services {
  accounts: AccountService;
  plans: PlanService;
  files: FileService;
  uploads: PlainUploads;
  ledger: UploadLedger;
  links: LinkService;
  resumable: ResumableUploads;
  /** Uploads straight to the store: taken only with S3_DIRECT_UPLOADS (404 direct_uploads_off without), swept always. */
  direct: DirectUploads;
  concurrencySlots: ConcurrencySlots;
  webhooks: WebhookEndpoints;
  /** The account's keys as its owner manages them (/api/v1/keys). */
  keys: ApiKeys;
  /** File requests, and their uploads in flight (cut when a request is closed, on any instance). */
  requests: FileRequests;
  requestUploads: LiveRequestUploads;
  adminToken: string;
  sweep: (graceSeconds?: number) => Promise<Awaited<ReturnType<Sweeper['sweep']>>>;
  /** `dropstream gc --check`: what the walk over the store's objects would remove, nothing removed. */
  checkOrphans: (graceSeconds?: number) => ReturnType<Sweeper['check']>;
}

async function buildServices(config: Config, logger: Logger, { db, store, uploadLifetime, redis }: Infrastructure, tools: Instruments, options: ServerOptions, closers: Closers): Promise<Services> {
  // Callers of API keys are cached for a second; changes reach every
  // instance's cache at once through Redis pub/sub (the TTL bounds
  // staleness when a notice is lost).
  // What instances tell each other (caller changes, ended links, tus
  // release requests) travels on one carrier: one listening connection per
  // instance (src/notices). Its channels are named below, then it starts.
  // PostgreSQL's LISTEN needs a session: never through a pooler (db.sessionUrl()).
  const sessionUrl = await db.sessionUrl();
  if (db.kind === 'postgresql' && !sessionUrl) warnWithoutSessions(logger, Boolean(redis));
  const notices = openNotices({
    redis: redis && { url: config.redisUrl!, publisher: redis, prefix: config.redisKeyPrefix },
    databaseUrl: sessionUrl,
    logger,
  });
  closers.add('notices', () => notices.close());
  const callers = new CallerCache({ ttlMs: options.callerCacheMs ?? CALLER_CACHE_MS, maxEntries: 10_000 });
  const publishChange = notices.channel('caller-changes', (message) => applyCallerChange(callers, message), { onMissed: () => callers.clear() });
  const changes = new CallerChanges(callers, { publish: publishChange, logger });
  const clock = options.clock ?? systemClock;
  const accounts = new AccountService(db.prisma, { cache: callers, changes, lastUsed: new LastUsed(db.prisma), clock });
  const keys = new ApiKeys(db.prisma, changes, clock);
  const plans = new PlanService(db.prisma, { maxFileSize: store.maxObjectSize }, changes);
  // The one upload ledger every upload path and the sweeper share.
  const ledger = new UploadLedger(db.prisma, { clock });
  const live = liveDownloads(logger, db, notices, closers);
  const files = new FileService({ prisma: db.prisma, store, ledger, onCleanupError: tools.onCleanupError, live });
  const links = new LinkService({
    prisma: db.prisma,
    store,
    live,
    offload: config.s3?.presign && { seconds: config.s3.presign.seconds },
    clock,
    downloadEvents: {
      pending: config.webhooks.pendingDownloads,
      onDropped: (count) => tools.metrics.webhookEventsDropped.inc({ type: 'file.downloaded' }, count),
    },
  });
  // Every upload opens and becomes a file here, whatever its transport.
  const intake = new Intake({ prisma: db.prisma, store, ledger, onCleanupError: tools.onCleanupError, lateWriteSeconds: config.storeLateWriteWindow, clock });
  const uploads = new PlainUploads({ intake, onCleanupError: tools.onCleanupError, heartbeatMs: options.uploadHeartbeatMs });
  // tus: the uploads' rows and their locker over the same ledger. A release
  // request (newest tus request wins) reaches the instance holding the lock
  // on the notice carrier; notices arrive only once it has started, below,
  // after the locker exists.
  const records = new ResumableRecords(db.prisma, ledger);
  const publishRelease = notices.channel('upload-release', (id) => locker.requestRelease(id));
  const requestUploads = liveRequestUploads(logger, db, notices, closers);
  const requests = new FileRequests(db.prisma, requestUploads, clock);
  const locker = new UploadLocker(records, {
    leaseMs: TUS_LOCK_MS,
    takeoverMs: config.resumableTakeoverTimeout * 1000,
    clock,
    publish: publishRelease,
    onError: tools.onCleanupError,
  });
  await notices.start();
  const resumable = new ResumableUploads({
    intake,
    records,
    locker,
    expirySeconds: config.resumableExpiry,
    lifetimeSeconds: uploadLifetime,
    onCleanupError: tools.onCleanupError,
    onDigestRead: () => tools.metrics.resumableDigestReads.inc(),
  });
  // Swept even with S3_DIRECT_UPLOADS turned off since: what uploads it left are aborted at their expiry.
  const direct = new DirectUploads({
    prisma: db.prisma,
    intake,
    ledger,
    store,
    expirySeconds: config.directUploadExpiry,
    storeLifetimeSeconds: uploadLifetime,
    defaultConcurrency: config.accountUploadConcurrency,
    onCleanupError: tools.onCleanupError,
    clock,
  });
  const sweeper = newSweeper(config, logger, db, store, ledger, allExpiring(resumable, direct), clock);
  const sweep = async (graceSeconds = config.gcGrace) => {
    const result = await sweeper.sweep(graceSeconds);
    if (result.expired || result.uploads || result.deletes || result.strays || result.orphans || result.failed) logger.info({ ...result }, 'swept expired files and pending objects');
    return result;
  };
  const checkOrphans = (graceSeconds = config.gcGrace) => sweeper.check(graceSeconds);
  const adminToken = await resolveAdminToken(config.adminToken, config.dataDir);
  const concurrencySlots = new ConcurrencySlots({
    redis,
    defaultLimit: config.accountUploadConcurrency,
    keyPrefix: config.redisKeyPrefix,
    onRedisError: (err) => logger.warn({ err: (err as Error).message }, 'redis failed: upload slots counted per instance'),
  });
  closers.add('concurrency slots', () => concurrencySlots.close());
  // Every instance relays webhook messages; closed before the database it settles them in.
  const relay = new Relay({
    prisma: db.prisma,
    logger,
    allowPrivate: config.webhooks.allowPrivate,
    maxBackoffMs: config.webhooks.maxBackoffSeconds * 1000,
    retryWindowMs: config.webhooks.retryHours * 3600 * 1000,
    concurrency: config.webhooks.concurrency,
    accountConcurrency: config.webhooks.accountConcurrency,
    onOutcome: (outcome) => tools.metrics.webhookDeliveries.inc({ outcome }),
    ...options.webhooks,
  });
  relay.start();
  closers.add('webhook relay', () => relay.close());
  return { accounts, keys, plans, files, uploads, ledger, links, resumable, direct, concurrencySlots, webhooks: new WebhookEndpoints(db.prisma), requests, requestUploads, adminToken, sweep, checkOrphans };
}

/**
 * Says at start what does not work behind a pooler that does not keep
 * sessions, with no DATABASE_DIRECT_URL, rather than letting it fail later:
 * a later release's migrations are refused at start, and without Redis the
 * instances cannot hear each other (a LISTEN through the pooler would hear
 * nothing, silently), so notices stay in this process.
 */
function warnWithoutSessions(logger: Logger, redis: boolean): void {
  const lost = ['migrations: a start with pending migrations (a new release) stops with an error, as does `dropstream migrate`'];
  if (!redis) {
    lost.push(
      'notices between instances (no REDIS_URL): a tus request on another instance than the one writing the upload waits RESUMABLE_TAKEOVER_TIMEOUT and gets 409 upload_busy, ' +
        "a revoked link or deleted file ends other instances' downloads at their next check (3 s), and API key changes reach other instances when their cache entry runs out (1 s)",
    );
  }
  logger.warn(
    { without: lost },
    'DATABASE_URL goes through a connection pooler that does not keep sessions (it refused or dropped a setting sent at connect), and DATABASE_DIRECT_URL is not set: what needs a session will not work; set DATABASE_DIRECT_URL to PostgreSQL itself (docs/operating.md#connection-poolers)',
  );
}

/**
 * The sweep: an ended upload's clean-up is retried after half a sweep
 * interval, then after twice as long each time, at most four intervals; the
 * walk over the store's objects reports each sweep's orphans in the log.
 */
function newSweeper(config: Config, logger: Logger, db: Database, store: ObjectStore, ledger: UploadLedger, expiring: ExpiringUploads, clock: Clock): Sweeper {
  const intervalMs = (config.gcInterval || 60) * 1000;
  return new Sweeper(db.prisma, store, ledger, expiring, {
    retryMs: { first: intervalMs / 2, max: 4 * intervalMs },
    auditRetentionDays: config.audit.retentionDays,
    clock,
    orphans: {
      ...config.gcOrphans,
      onFound: (orphans, mode) =>
        logger.warn(
          { orphans: orphans.map((o) => ({ key: o.key, size: o.size, modified: o.modified.toISOString() })), mode },
          mode === 'remove' ? 'removed objects that no file or pending upload names' : 'found objects that no file or pending upload names (GC_ORPHAN_OBJECTS=report: left in place)',
        ),
    },
  });
}

/**
 * Downloads in flight, ended when their link is revoked or their file
 * deleted: the notice goes to the other instances on the carrier's
 * link-ended channel.
 */
function liveDownloads(logger: Logger, db: Database, notices: NoticeCarrier, closers: Closers): LiveDownloads {
  const live: LiveDownloads = new LiveDownloads({
    prisma: db.prisma,
    publish: notices.channel('link-ended', (message) => live.receive(message)),
    onError: (err) => logger.warn({ err: (err as Error).message }, 'ending the downloads of a revoked link: a notice or check failed (the next check retries)'),
  });
  closers.add('live downloads', () => live.close());
  return live;
}

/**
 * Uploads in flight through file requests, cut when their request is
 * closed: the notice goes to the other instances on the carrier's
 * request-closed channel.
 */
function liveRequestUploads(logger: Logger, db: Database, notices: NoticeCarrier, closers: Closers): LiveRequestUploads {
  const live: LiveRequestUploads = new LiveRequestUploads({
    prisma: db.prisma,
    publish: notices.channel('request-closed', (message) => live.receive(message)),
    onError: (err) => logger.warn({ err: (err as Error).message }, 'ending the uploads of a closed file request: a notice or check failed (the next check retries)'),
  });
  closers.add('live request uploads', () => live.close());
  return live;
}

/**
 * How often what lapsed uploads through file requests hold is given back:
 * a tenth of REQUEST_UPLOAD_EXPIRY, from a second to a minute, so a slot or
 * a byte is held at most that much past the expiry.
 */
export const lapseIntervalSeconds = (requestUploadExpiry: number) => Math.min(60, Math.max(1, Math.ceil(requestUploadExpiry / 10)));

/** The public and the admin app; `state.draining` turns readiness off during a shutdown. */
function buildApps(config: Config, logger: Logger, infra: Infrastructure, services: Services, tools: Instruments, state: { draining: boolean }) {
  const { db, store, redis } = infra;
  const failures = (name: string, failures: number) => new FailureLimits({ redis, keyPrefix: config.redisKeyPrefix, name, failures, windowSeconds: 60 });
  const app = createApp({
    accounts: services.accounts,
    files: services.files,
    uploads: services.uploads,
    links: services.links,
    resumable: services.resumable,
    direct: services.direct,
    webhooks: services.webhooks,
    keys: services.keys,
    audit: { trail: new AuditTrail(db.prisma), fullAddresses: config.audit.fullAddresses, downloads: config.audit.downloads },
    // File requests (issue 45): their service and the per-address limits of their links.
    requests: {
      service: services.requests,
      limits: new RequestLinkLimits({ redis, keyPrefix: config.redisKeyPrefix, ...config.requestLinkLimits }),
      live: services.requestUploads,
      uploadExpirySeconds: config.requestUploadExpiry,
    },
    uploadGate: tools.uploadGate,
    concurrencySlots: services.concurrencySlots,
    bodyRate: { minRate: config.uploadMinRate, windowSeconds: config.uploadRateWindow },
    downloadRate: { minRate: config.downloadMinRate, windowSeconds: config.downloadRateWindow },
    requestLimits: new RequestLimits({ redis, keyPrefix: config.redisKeyPrefix }),
    requestsInFlight: new RequestsInFlight(config.accountRequestsInFlight),
    bodyTimeoutMs: config.bodyTimeout * 1000,
    authFailures: failures('auth', config.authFailureLimit),
    tokenFailures: failures('link', config.linkFailureLimit),
    passwordFailures: new FailureLimits({ redis, keyPrefix: config.redisKeyPrefix, name: 'password', ...config.linkPasswordLimit }),
    metrics: tools.metrics,
    logger,
    publicUrl: config.publicUrl,
    trustProxy: config.trustProxy,
    trustedProxies: config.trustedProxies,
    trustedProxyHops: config.trustedProxyHops,
    clientIpv6Prefix: config.clientIpv6Prefix,
    onUntrustedForward: untrustedForwardLog(logger),
    corsOrigins: config.corsOrigins,
    // While draining, load balancers must stop sending traffic here.
    readiness: async () => (state.draining ? { ready: false, checks: { shutdown: 'down' } } : checkReadiness(db, store, tools.storeHealth, redis)),
  });
  // `dropstream gc` also recounts the file counters; the schedule does not
  // (a scan of every file row, and the counters are kept exact as files come and go).
  const sweepAndRecount = async (graceSeconds?: number) => {
    const swept = await services.sweep(graceSeconds);
    const countersFixed = (await recountFiles(db.prisma)) + (await services.ledger.recountReservations());
    if (countersFixed) logger.warn({ accounts: countersFixed }, 'corrected file counters');
    return { ...swept, countersFixed };
  };
  // Wrong admin tokens are throttled per address like bad API keys (issue 27).
  const adminApp = createAdminApp({
    accounts: services.accounts,
    plans: services.plans,
    logger,
    adminToken: services.adminToken,
    adminFailures: failures('admin', config.authFailureLimit),
    metrics: tools.metrics,
    sweep: sweepAndRecount,
    checkOrphans: services.checkOrphans,
    clientIpv6Prefix: config.clientIpv6Prefix,
    bodyTimeoutMs: config.bodyTimeout * 1000,
  });
  return { app, adminApp };
}

/**
 * Opens the database (migrated), the object store and Redis, builds the
 * services and the two apps, and starts the background work every instance
 * does (webhook relay, sweep schedule). Listens on nothing: src/start.ts
 * does that, and a test may drive `app.callback()` instead.
 */
export async function buildServer(config: Config, logger: Logger, options: ServerOptions = {}): Promise<BuiltServer> {
  await secureDataDir(config.dataDir, logger);
  const closers = new Closers();
  const state = { draining: false };
  const closeAll = () => closers.closeAll((closer, err) => logger.warn({ err, closer }, 'closing failed'));
  try {
    const tools = instruments(config, logger);
    countLogDrops(logger, tools.metrics, closers);
    const infra = await openInfrastructure(config, logger, tools, closers);
    const services = await buildServices(config, logger, infra, tools, options, closers);
    const { app, adminApp } = buildApps(config, logger, infra, services, tools, state);
    if (config.trustProxy && !config.trustedProxies) {
      logger.warn("TRUST_PROXY=true believes X-Forwarded-For from every peer: a client that reaches the app directly can name any address and evade every per-client limit; set TRUST_PROXY to the proxies' addresses or CIDR ranges instead");
    }
    // No sweep starts once a shutdown drains: the store and the database close under it after the drain.
    if (config.gcInterval > 0) {
      const sweepTimer = setInterval(() => {
        if (!state.draining) services.sweep().catch((err: unknown) => logger.warn({ err }, 'sweep failed'));
      }, config.gcInterval * 1000).unref();
      closers.add('sweep timer', () => clearInterval(sweepTimer));
    }
    // Uploads through file requests hold what they took until REQUEST_UPLOAD_EXPIRY, not until the next sweep
    // (one statement; the sweep removes their bytes later). Not tied to GC_INTERVAL: it enforces an expiry, it does not collect.
    const lapseTimer = setInterval(() => {
      if (!state.draining) services.requests.lapseUploads().catch((err: unknown) => logger.warn({ err }, 'giving back what lapsed file request uploads held failed'));
    }, lapseIntervalSeconds(config.requestUploadExpiry) * 1000).unref();
    closers.add('request upload lapse timer', () => clearInterval(lapseTimer));
    const summary = { ...buildInfo(), database: infra.db.kind, store: config.store, publicUrl: config.publicUrl, rateLimits: await rateLimitsAtStart(config.redisUrl, infra.redis) };
    let closing: Promise<void> | undefined;
    return {
      app,
      adminApp,
      adminToken: services.adminToken,
      db: infra.db,
      metrics: tools.metrics,
      summary,
      uploadsInFlight: () => tools.uploadGate.inFlight,
      drain: () => void (state.draining = true),
      close: () => (closing ??= closeAll()),
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
