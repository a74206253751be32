// All configuration comes from the environment, is validated once at start,
// and a bad value stops the process with a message naming the variable.
import { resolve } from 'node:path';
import { z } from 'zod';
import { isProxyRange } from './client-key.js';

// Digits only: z.coerce.number() would read ' ' as 0 (a random port) and
// accept '0x10' or '1e3'.
const port = z
  .string()
  .regex(/^[0-9]{1,5}$/, 'must be an integer from 0 to 65535')
  .transform(Number)
  .pipe(z.number().max(65535, 'must be an integer from 0 to 65535'));

const MiB = 1024 * 1024;
const integer = (min: number, max: number, message = `must be an integer from ${min} to ${max}`) =>
  z.string().regex(/^[0-9]+$/, message).transform(Number).pipe(z.number().min(min, message).max(max, message));
const flag = z
  .enum(['true', 'false', '1', '0'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1');

/** Hosts only this machine can reach: an admin listener there needs no warning. */
export const isLoopback = (host: string) => host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
/**
 * Every admin token, on any listener: a locked-out address learns nothing
 * from its answers (issue 38), and 32 characters are far past what the
 * failure limit lets anyone try. A generated one is 64 hex characters.
 */
export const ADMIN_TOKEN_MIN = 32;

/** `value` as a URL, or undefined where the WHATWG parser (the one pg, ioredis and the SDK use) refuses it. */
const parsedUrl = (value: string | undefined): URL | undefined => {
  try {
    return value === undefined ? undefined : new URL(value);
  } catch {
    return undefined;
  }
};

/**
 * A URL setting with one of `schemes`. Parsed here, so a value the parser
 * refuses (a space, a port over 65535, a bracket) is one line naming the
 * variable, not a TypeError from whoever parses it next. `echo`: whether the
 * message may repeat the value (not for URLs that carry passwords).
 */
const urlSetting = (schemes: string[], example: string, echo: boolean) =>
  z.string().superRefine((value, ctx) => {
    const url = parsedUrl(value);
    if (url && schemes.includes(url.protocol.slice(0, -1))) return;
    const shown = echo ? `"${value}" ` : '';
    const wanted = schemes.map((s) => `${s}://`).join(' or ');
    const reason = !/^[a-z][a-z0-9+.-]*:\/\//i.test(value)
      ? `has no scheme: write it as a URL, e.g. ${echo ? `${schemes[0]}://${value} (or ${schemes[1]}://${value} for TLS)` : example}`
      : url
        ? `must be ${/^h/.test(wanted) ? 'an' : 'a'} ${wanted} URL, e.g. ${example}`
        : `is not a valid ${wanted} URL (a space, a port over 65535, an unencoded special character?), e.g. ${example}`;
    ctx.addIssue({ code: 'custom', message: `${shown}${reason}` });
  });

const schema = z
  .object({
    PORT: port.default(3000),
    HOST: z.string().min(1).default('0.0.0.0'),
    PUBLIC_URL: urlSetting(['http', 'https'], 'https://files.example.com', true).optional(),
    DATA_DIR: z.string().min(1).default('./data'),
    DATABASE_URL: urlSetting(['postgresql', 'postgres'], 'postgresql://user:password@host:5432/dropstream', false).optional(),
    DATABASE_DIRECT_URL: urlSetting(['postgresql', 'postgres'], 'postgresql://user:password@postgres:5432/dropstream', false).optional(),
    DATABASE_CONNECT_TIMEOUT: integer(0, 3600).default(60),
    DATABASE_QUERY_TIMEOUT: integer(1, 3600).default(10),
    ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
    ADMIN_PORT: port.default(3001),
    ADMIN_TOKEN: z.string().min(ADMIN_TOKEN_MIN, `must be at least ${ADMIN_TOKEN_MIN} characters; generate one with: openssl rand -hex 32`).optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    STORE: z.enum(['local', 's3']).optional(),
    S3_ENDPOINT: urlSetting(['http', 'https'], 'http://127.0.0.1:9000', true).optional(),
    S3_BUCKET: z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be a valid bucket name').optional(),
    S3_REGION: z.string().min(1).default('us-east-1'),
    S3_ACCESS_KEY_ID: z.string().min(1).optional(),
    S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
    S3_FORCE_PATH_STYLE: flag.default(false),
    S3_PART_SIZE: integer(5 * MiB, 5 * 1024 * MiB, 'must be bytes from 5 MiB (5242880) to 5 GiB').default(8 * MiB),
    S3_PARTS_IN_FLIGHT: integer(1, 16).default(2),
    S3_SHARED_PART_BUFFERS: integer(0, 1024).default(4),
    S3_ABORT_INCOMPLETE_DAYS: integer(0, 3650).default(7),
    S3_PRESIGNED_DOWNLOADS: flag.default(false),
    S3_POOLED_READS: flag.default(true),
    S3_DIRECT_UPLOADS: flag.default(false),
    S3_PUBLIC_ENDPOINT: urlSetting(['http', 'https'], 'https://files.example.com', true).optional(),
    // SigV4 URLs live at most 7 days.
    S3_PRESIGN_SECONDS: integer(1, 604_800).default(60),
    STORE_CALL_TIMEOUT: integer(1, 3600).default(10),
    STORE_MIN_RATE: integer(1024, 10 * 1024 * MiB, 'must be bytes per second from 1024').default(512 * 1024),
    STORE_READ_IDLE_TIMEOUT: integer(1, 3600).default(30),
    STORE_LATE_WRITE_WINDOW: integer(0, 7 * 86_400).default(900),
    UPLOAD_CONCURRENCY: integer(1, 10_000).default(32),
    ACCOUNT_UPLOAD_CONCURRENCY: integer(1, 100_000).default(8),
    UPLOAD_MIN_RATE: integer(0, 1024 * MiB, 'must be bytes per second from 0 (no cut) to 1073741824').default(1024),
    UPLOAD_RATE_WINDOW: integer(1, 3600).default(30),
    DOWNLOAD_MIN_RATE: integer(0, 1024 * MiB, 'must be bytes per second from 0 (no cut) to 1073741824').default(1024),
    DOWNLOAD_RATE_WINDOW: integer(1, 3600).default(30),
    REDIS_URL: urlSetting(['redis', 'rediss'], 'redis://127.0.0.1:6379', false).optional(),
    REDIS_KEY_PREFIX: z.string().regex(/^[A-Za-z0-9:_-]{1,64}$/, 'letters, digits, : _ - (at most 64)').default('dropstream'),
    TRUST_PROXY: z
      .string()
      .transform((value, ctx) => {
        if (['true', '1'].includes(value)) return true as const;
        if (['false', '0'].includes(value)) return false as const;
        const ranges = value.split(',').map((range) => range.trim());
        if (ranges.every(isProxyRange)) return ranges;
        ctx.addIssue({ code: 'custom', message: 'must be true, false, or a comma-separated list of the proxies\' addresses or CIDR ranges (e.g. 10.0.0.5,10.1.0.0/16)' });
        return z.NEVER;
      })
      .default(false),
    TRUSTED_PROXY_HOPS: integer(1, 10).default(1),
    CORS_ORIGINS: z
      .string()
      .regex(/^(\*|https?:\/\/[^,\s]+(,https?:\/\/[^,\s]+)*)$/, 'must be * or a comma-separated list of http(s) origins')
      .optional(),
    LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
    SHUTDOWN_TIMEOUT: integer(0, 3600).default(30),
    SHUTDOWN_IDLE_WAIT: integer(0, 5).default(5),
    HEADERS_TIMEOUT: integer(1, 600).default(20),
    MAX_CONNECTIONS_PER_ADDRESS: integer(0, 1_000_000).default(256),
    MAX_CONNECTIONS: integer(0, 100_000_000).optional(),
    CLIENT_IPV6_PREFIX: integer(1, 128).default(64),
    IDLE_TIMEOUT: integer(1, 3600).default(60),
    BODY_TIMEOUT: integer(1, 3600).default(10),
    ACCOUNT_REQUESTS_IN_FLIGHT: integer(1, 1_000_000).default(64),
    GC_GRACE: integer(0, 30 * 86_400).default(3600),
    GC_INTERVAL: integer(0, 86_400).default(600),
    GC_ORPHAN_OBJECTS: z.enum(['remove', 'report', 'off']).default('remove'),
    GC_OBJECTS_PER_SWEEP: integer(1, 1_000_000).default(1000),
    RESUMABLE_EXPIRY: integer(1, 30 * 86_400).default(86_400),
    DIRECT_UPLOAD_EXPIRY: integer(60, 30 * 86_400).default(86_400),
    RESUMABLE_TAKEOVER_TIMEOUT: integer(0, 600).default(10),
    AUTH_FAILURE_LIMIT: integer(1, 1_000_000).default(20),
    LINK_FAILURE_LIMIT: integer(1, 1_000_000).default(60),
    REQUEST_LINK_REQUESTS_PER_MINUTE: integer(1, 1_000_000).default(120),
    REQUEST_LINK_UPLOADS_PER_HOUR: integer(1, 1_000_000).default(60),
    REQUEST_UPLOAD_EXPIRY: integer(1, 30 * 86_400).default(3600),
    LINK_PASSWORD_FAILURE_LIMIT: integer(1, 1_000_000).default(100),
    LINK_PASSWORD_LOCK: integer(1, 30 * 86_400).default(300),
    WEBHOOK_MAX_BACKOFF: integer(1, 86_400).default(300),
    WEBHOOK_RETRY_HOURS: integer(1, 30 * 24).default(72),
    WEBHOOK_ALLOW_PRIVATE: flag.default(false),
    WEBHOOK_CONCURRENCY: integer(1, 10_000).default(16),
    WEBHOOK_ACCOUNT_CONCURRENCY: integer(1, 10_000).optional(),
    WEBHOOK_PENDING_DOWNLOADS: integer(1, 1_000_000).default(1000),
    AUDIT_RETENTION_DAYS: integer(1, 100 * 365).default(365),
    AUDIT_FULL_ADDRESSES: flag.default(false),
    AUDIT_DOWNLOADS: flag.default(false),
  })
  .superRefine((env, ctx) => {
    if ((env.S3_ENDPOINT || env.S3_ACCESS_KEY_ID) && !env.S3_BUCKET) {
      ctx.addIssue({ code: 'custom', path: ['S3_BUCKET'], message: 'is required when S3_ENDPOINT or S3 credentials are set' });
    }
    // .env.example's secrets are "change-me-..." placeholders; a stack started with them would run on public secrets.
    const placeholder = (value: string | undefined) => value?.includes('change-me') ?? false;
    for (const name of ['S3_SECRET_ACCESS_KEY', 'ADMIN_TOKEN'] as const) {
      if (placeholder(env[name])) ctx.addIssue({ code: 'custom', path: [name], message: 'is still the .env.example placeholder: change it' });
    }
    // Refinements run even when a field failed: a DATABASE_URL that is no URL was said above.
    for (const name of ['DATABASE_URL', 'DATABASE_DIRECT_URL'] as const) {
      const databasePassword = parsedUrl(env[name])?.password;
      if (!databasePassword) continue;
      let password: string | undefined;
      try {
        password = decodeURIComponent(databasePassword);
      } catch {
        // pg decodes it the same way, and would fail with a URIError at the first connection.
        ctx.addIssue({ code: 'custom', path: [name], message: 'has a % in its password not followed by two hex digits: percent-encode the password (% is %25)' });
      }
      if (placeholder(password)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'has the .env.example placeholder as its password (POSTGRES_PASSWORD): change it' });
      }
    }
    // The direct URL is the session beside a pooled DATABASE_URL; alone it would be ignored (PGlite), silently.
    if (env.DATABASE_DIRECT_URL && !env.DATABASE_URL) {
      ctx.addIssue({ code: 'custom', path: ['DATABASE_DIRECT_URL'], message: 'is set but DATABASE_URL is not: it is the direct connection beside a DATABASE_URL that goes through a connection pooler; set DATABASE_URL too, or unset it' });
    }
    if (env.STORE === 's3' && !env.S3_BUCKET) {
      ctx.addIssue({ code: 'custom', path: ['S3_BUCKET'], message: 'is required when STORE is s3' });
    }
    // Explicit beats implicit, but not silently: objects would go to DATA_DIR while the operator set up a bucket.
    if (env.STORE === 'local' && env.S3_BUCKET) {
      ctx.addIssue({ code: 'custom', path: ['STORE'], message: 'is local but S3_BUCKET is set: unset S3_BUCKET (and the other S3_ settings), or set STORE=s3' });
    }
    // Only S3 can serve the bytes itself; on the local store the setting would do nothing, silently.
    if (env.S3_PRESIGNED_DOWNLOADS && !env.S3_BUCKET) {
      ctx.addIssue({ code: 'custom', path: ['S3_PRESIGNED_DOWNLOADS'], message: 'is true but the store is local: presigned downloads need the S3 store (set S3_BUCKET), or unset it' });
    }
    // Only S3 can take the parts itself, as for the download offload.
    if (env.S3_DIRECT_UPLOADS && !env.S3_BUCKET) {
      ctx.addIssue({ code: 'custom', path: ['S3_DIRECT_UPLOADS'], message: 'is true but the store is local: uploads straight to the store need the S3 store (set S3_BUCKET), or unset it' });
    }
    if (env.S3_BUCKET && env.S3_DIRECT_UPLOADS && env.S3_ABORT_INCOMPLETE_DAYS > 0 && env.DIRECT_UPLOAD_EXPIRY > env.S3_ABORT_INCOMPLETE_DAYS * 86_400) {
      ctx.addIssue({
        code: 'custom',
        path: ['DIRECT_UPLOAD_EXPIRY'],
        message: `is longer than S3_ABORT_INCOMPLETE_DAYS (${env.S3_ABORT_INCOMPLETE_DAYS} days, ${env.S3_ABORT_INCOMPLETE_DAYS * 86_400} s), after which the bucket aborts an upload's parts; lower it or raise S3_ABORT_INCOMPLETE_DAYS`,
      });
    }
    // The bucket's lifecycle rule aborts a multipart upload that many days
    // after it began, however recently it was written to: a resumable upload
    // may not be promised a longer life (server.ts caps each upload's total
    // life at the rule in force, too).
    if (env.S3_BUCKET && env.S3_ABORT_INCOMPLETE_DAYS > 0 && env.RESUMABLE_EXPIRY > env.S3_ABORT_INCOMPLETE_DAYS * 86_400) {
      ctx.addIssue({
        code: 'custom',
        path: ['RESUMABLE_EXPIRY'],
        message: `is longer than S3_ABORT_INCOMPLETE_DAYS (${env.S3_ABORT_INCOMPLETE_DAYS} days, ${env.S3_ABORT_INCOMPLETE_DAYS * 86_400} s), after which the bucket aborts a resumable upload's parts; lower it or raise S3_ABORT_INCOMPLETE_DAYS`,
      });
    }
    if (env.WEBHOOK_ACCOUNT_CONCURRENCY !== undefined && env.WEBHOOK_ACCOUNT_CONCURRENCY > env.WEBHOOK_CONCURRENCY) {
      ctx.addIssue({ code: 'custom', path: ['WEBHOOK_ACCOUNT_CONCURRENCY'], message: 'must not be more than WEBHOOK_CONCURRENCY' });
    }
    if (!env.S3_ACCESS_KEY_ID !== !env.S3_SECRET_ACCESS_KEY) {
      ctx.addIssue({ code: 'custom', path: ['S3_SECRET_ACCESS_KEY'], message: 'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together' });
    }
  })
  .transform((env) => ({
    port: env.PORT,
    host: env.HOST,
    publicUrl: (env.PUBLIC_URL ?? `http://localhost:${env.PORT}`).replace(/\/+$/, ''),
    dataDir: resolve(env.DATA_DIR),
    databaseUrl: env.DATABASE_URL,
    /** PostgreSQL itself (or a pooler in session mode) where DATABASE_URL goes through one in transaction mode: migrations and the notice carrier's LISTEN. */
    databaseDirectUrl: env.DATABASE_DIRECT_URL,
    /** Seconds to keep retrying an unreachable PostgreSQL at start (it may be starting too); 0 tries once. */
    databaseConnectTimeout: env.DATABASE_CONNECT_TIMEOUT,
    /** Seconds a PostgreSQL statement may run or wait (for a lock, a connection, an answer) before the request gets 503. */
    databaseQueryTimeout: env.DATABASE_QUERY_TIMEOUT,
    adminHost: env.ADMIN_HOST,
    adminPort: env.ADMIN_PORT,
    adminToken: env.ADMIN_TOKEN,
    logLevel: env.LOG_LEVEL,
    /** JSON lines, or colourised lines for a terminal; unset: `serve` picks by whether stdout is one (src/log-format.ts). */
    logFormat: env.LOG_FORMAT,
    /** Seconds in-flight requests get to finish after SIGTERM before they are cut off. */
    shutdownTimeout: env.SHUTDOWN_TIMEOUT,
    /**
     * Seconds an idle keep-alive connection is kept open during a shutdown
     * for its client's next request (answered with `Connection: close`)
     * before the server closes it; at most the 5 s keep-alive timeout the
     * server advertises, which clients that honour it never reach. 0: idle
     * connections close at once.
     */
    shutdownIdleWait: env.SHUTDOWN_IDLE_WAIT,
    /** Seconds a client has to send its request headers (stops slow-loris clients). */
    headersTimeout: env.HEADERS_TIMEOUT,
    /**
     * Connections one peer address may hold open on the public listener; more
     * are closed as they come. 0: no cap. The peer is the socket's, not
     * X-Forwarded-For's: behind a proxy, every connection is the proxy's.
     */
    maxConnectionsPerAddress: env.MAX_CONNECTIONS_PER_ADDRESS,
    /**
     * Connections the public listener holds open at once; at the cap a new
     * one closes the oldest idle one, or is closed itself. Unset: from the
     * open-files limit (src/open-files.ts, at start); 0: no cap.
     */
    maxConnections: env.MAX_CONNECTIONS,
    /** Seconds a connection may stay silent mid-request; a long upload that keeps sending is never cut. */
    idleTimeout: env.IDLE_TIMEOUT,
    /** Seconds a JSON body (not an upload) may take to arrive once it is read, or 408 body_timeout and the connection closed. */
    bodyTimeout: env.BODY_TIMEOUT,
    /**
     * Requests one account may have in progress on one instance besides its
     * uploads: the cap is this plus the plan's concurrent uploads; the next
     * is 429 too_many_requests_in_flight (src/limits/requests-in-flight.ts).
     */
    accountRequestsInFlight: env.ACCOUNT_REQUESTS_IN_FLIGHT,
    uploadConcurrency: env.UPLOAD_CONCURRENCY,
    /** Uploads an account runs at once on all instances when its plan sets no concurrent_uploads. */
    accountUploadConcurrency: env.ACCOUNT_UPLOAD_CONCURRENCY,
    /**
     * Deadlines of object store calls (storage/store-deadlines.ts): a call
     * without a body (and a read's first byte) gets STORE_CALL_TIMEOUT; a
     * write of n bytes that plus n / STORE_MIN_RATE; a read waits at most
     * STORE_READ_IDLE_TIMEOUT for its next bytes.
     */
    storeDeadlines: { callMs: env.STORE_CALL_TIMEOUT * 1000, minRate: env.STORE_MIN_RATE, readIdleMs: env.STORE_READ_IDLE_TIMEOUT * 1000 },
    /** Bytes per second an upload body must average over uploadRateWindow, or it is cut with 408; 0: never cut. */
    uploadMinRate: env.UPLOAD_MIN_RATE,
    /** Seconds over which an upload body's rate is averaged. */
    uploadRateWindow: env.UPLOAD_RATE_WINDOW,
    /** Bytes per second a client must read a download at, averaged over downloadRateWindow, or its connection is closed; 0: never. */
    downloadMinRate: env.DOWNLOAD_MIN_RATE,
    /** Seconds over which a download's rate is averaged. */
    downloadRateWindow: env.DOWNLOAD_RATE_WINDOW,
    /** Shared rate-limit counters; absent means in-memory, per instance. */
    redisUrl: env.REDIS_URL,
    /** Prefix of every Redis key, so deployments can share one Redis. */
    redisKeyPrefix: env.REDIS_KEY_PREFIX,
    /** Take the client address from X-Forwarded-For (behind a reverse proxy): from every peer, or only from trustedProxies. */
    trustProxy: env.TRUST_PROXY !== false,
    /** TRUST_PROXY as a list: the proxies' addresses and CIDR ranges, whose X-Forwarded-For alone is believed. Absent: every peer's (TRUST_PROXY=true) or none. */
    trustedProxies: Array.isArray(env.TRUST_PROXY) ? env.TRUST_PROXY : undefined,
    /** Bits of an IPv6 address that name one client in every per-client limit (src/client-key.ts). */
    clientIpv6Prefix: env.CLIENT_IPV6_PREFIX,
    /**
     * Proxies of ours in front (each appends the address it saw to
     * X-Forwarded-For): the client is the entry that many from the right.
     * Entries further left were written by the client and are not believed.
     */
    trustedProxyHops: env.TRUSTED_PROXY_HOPS,
    /** Browser origins allowed to call the API (CORS); absent means none. */
    corsOrigins: env.CORS_ORIGINS === undefined ? [] : env.CORS_ORIGINS.split(','),
    /** Seconds an upload must have been silent before the sweep treats it as abandoned. */
    gcGrace: env.GC_GRACE,
    /** Seconds between sweeps on each instance; 0 turns the schedule off (`dropstream gc` still works). */
    gcInterval: env.GC_INTERVAL,
    /**
     * The sweep's walk over the store's objects (files/orphans.ts): what it
     * does with objects older than GC_GRACE that no file row or pending
     * record names (remove, report them in the log, or no walk), and how
     * many objects one sweep lists.
     */
    gcOrphans: { mode: env.GC_ORPHAN_OBJECTS, perSweep: env.GC_OBJECTS_PER_SWEEP },
    /**
     * Seconds after a store write was cut (no answer: a timeout, a cut
     * connection) during which the store may still apply it: the upload's
     * record stays that long and its object is removed again after it.
     */
    storeLateWriteWindow: env.STORE_LATE_WRITE_WINDOW,
    /** Seconds an unfinished resumable upload lives after its creation or last write (Upload-Expires). */
    resumableExpiry: env.RESUMABLE_EXPIRY,
    /** Seconds an upload straight to the store (S3_DIRECT_UPLOADS) may take from its creation to its completion; then the sweep aborts it. */
    directUploadExpiry: env.DIRECT_UPLOAD_EXPIRY,
    /** Seconds a tus request waits for the request writing to the same upload to stop and let go (newest request wins); 0: 409 at once. */
    resumableTakeoverTimeout: env.RESUMABLE_TAKEOVER_TIMEOUT,
    /** Failed API keys, and unknown download links, allowed per client address and minute before 429. */
    authFailureLimit: env.AUTH_FAILURE_LIMIT,
    linkFailureLimit: env.LINK_FAILURE_LIMIT,
    /** File request links (/r/...), per client address: requests a minute, uploads started an hour (src/limits/request-link-limits.ts). */
    requestLinkLimits: { requestsPerMinute: env.REQUEST_LINK_REQUESTS_PER_MINUTE, uploadsPerHour: env.REQUEST_LINK_UPLOADS_PER_HOUR },
    /** Seconds an upload through a file request may hold its place, daily slot and bytes: from its start (tus: its creation) to its file, not renewed by writes. */
    requestUploadExpiry: env.REQUEST_UPLOAD_EXPIRY,
    /**
     * Wrong passwords one link may take from all addresses within the lock's
     * length (counted from the first); the one past it locks the link's
     * password, right or wrong, for LINK_PASSWORD_LOCK seconds.
     */
    linkPasswordLimit: { failures: env.LINK_PASSWORD_FAILURE_LIMIT, windowSeconds: env.LINK_PASSWORD_LOCK, lockSeconds: env.LINK_PASSWORD_LOCK },
    /**
     * Webhook deliveries (src/webhooks/relay.ts): the longest wait between
     * tries, how long an event is tried, whether private addresses may
     * receive; sends in flight per instance and one account's share of them
     * (half, rounded up, unless set); undelivered file.downloaded messages one
     * webhook may hold (src/webhooks/events.ts).
     */
    webhooks: {
      maxBackoffSeconds: env.WEBHOOK_MAX_BACKOFF,
      retryHours: env.WEBHOOK_RETRY_HOURS,
      allowPrivate: env.WEBHOOK_ALLOW_PRIVATE,
      concurrency: env.WEBHOOK_CONCURRENCY,
      accountConcurrency: env.WEBHOOK_ACCOUNT_CONCURRENCY ?? Math.ceil(env.WEBHOOK_CONCURRENCY / 2),
      pendingDownloads: env.WEBHOOK_PENDING_DOWNLOADS,
    },
    /**
     * The audit trail (src/audit/): rows older than retentionDays are removed
     * by the sweep; client addresses are kept as their /24 (IPv4) or /48
     * (IPv6) unless fullAddresses; complete downloads are recorded only with downloads on.
     */
    audit: { retentionDays: env.AUDIT_RETENTION_DAYS, fullAddresses: env.AUDIT_FULL_ADDRESSES, downloads: env.AUDIT_DOWNLOADS },
    /** Where objects go: DATA_DIR/objects, or S3 (STORE, or S3_BUCKET when STORE is unset). */
    store: env.STORE ?? (env.S3_BUCKET ? 's3' : 'local'),
    /** The S3 settings, present when the store is S3. */
    s3: env.S3_BUCKET
      ? {
          endpoint: env.S3_ENDPOINT,
          bucket: env.S3_BUCKET,
          region: env.S3_REGION,
          credentials:
            env.S3_ACCESS_KEY_ID && env.S3_SECRET_ACCESS_KEY
              ? { accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY }
              : undefined,
          forcePathStyle: env.S3_FORCE_PATH_STYLE,
          partSize: env.S3_PART_SIZE,
          partsInFlight: env.S3_PARTS_IN_FLIGHT,
          sharedPartBuffers: env.S3_SHARED_PART_BUFFERS,
          /** Days after which the bucket's lifecycle rule aborts incomplete multipart uploads; 0 leaves the bucket's rules alone. */
          abortIncompleteDays: env.S3_ABORT_INCOMPLETE_DAYS,
          /** Downloads handed to the store as presigned URLs (S3_PRESIGNED_DOWNLOADS), signed for the public endpoint, living `seconds` at most. */
          /** Downloads read from the store into reused buffers (storage/pooled-read.ts); false: through the SDK's GetObject. */
          pooledReads: env.S3_POOLED_READS,
          presign: env.S3_PRESIGNED_DOWNLOADS ? { publicEndpoint: env.S3_PUBLIC_ENDPOINT ?? env.S3_ENDPOINT, seconds: env.S3_PRESIGN_SECONDS } : undefined,
          /** Uploads straight to the store (S3_DIRECT_UPLOADS), their part URLs signed for the public endpoint. */
          direct: env.S3_DIRECT_UPLOADS ? { publicEndpoint: env.S3_PUBLIC_ENDPOINT ?? env.S3_ENDPOINT } : undefined,
        }
      : undefined,
  }));

export type Config = z.output<typeof schema>;

/** The environment variables the server reads (the compose-file test checks against these). */
export const configVariables = Object.keys(schema.in.shape);

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `VAR= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== ''));
  const result = schema.safeParse(present);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  return result.data;
}
