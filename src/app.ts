import cors from '@koa/cors';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { PlanService } from './accounts/plans.js';
import type { AccountService } from './accounts/service.js';
import { badRequest } from './errors.js';
import type { FileService } from './files/service.js';
import type { PlainUploads } from './uploads/service.js';
import type { LinkService } from './links/service.js';
import type { GcResult, OrphanCheckResult } from './admin/routes.js';
import type { ResumableUploads } from './tus/uploads.js';
import type { UploadGate } from './limits/upload-gate.js';
import type { ConcurrencySlots } from './limits/concurrent-uploads.js';
import type { BodyRateOptions } from './http/body-rate.js';
import type { Readiness } from './health/readiness.js';
import { adminRoutes, requireAdminToken } from './admin/routes.js';
import { clientAddress } from './http/client-address.js';
import { API_PREFIX, apiRoutes } from './api.js';
import { declaredScopes } from './http/scoped.js';
import { downloadRoutes } from './downloads/routes.js';
import { docsRoutes } from './pages/docs.js';
import { homeRoute } from './pages/home.js';
import { webAppRoutes } from './pages/web-app.js';
import { errorResponses, lateErrors } from './http/errors.js';
import { HEALTH_PATHS, healthRoutes } from './health/routes.js';
import { TUS_REQUEST_HEADERS, TUS_RESPONSE_HEADERS } from './tus/headers.js';
import { requestLog } from './http/request-log.js';
import { singleHeaders } from './http/single-headers.js';
import type { FailureLimits } from './limits/failure-limits.js';
import type { RequestLimits } from './limits/request-limits.js';
import type { RequestsInFlight } from './limits/requests-in-flight.js';
import { jsonBody } from './http/json-body.js';
import type { Metrics } from './metrics.js';
import type { WebhookEndpoints } from './webhooks/endpoints.js';
import type { ApiKeys } from './keys/api-keys.js';
import type { AuditTrail } from './trail/trail.js';
import { truncateAddress } from './audit/actor.js';
import type { FileRequests } from './requests/service.js';
import type { LiveRequestUploads } from './requests/live-uploads.js';
import type { RequestLinkLimits } from './limits/request-link-limits.js';
import { requestLinkRoutes } from './requests/link-routes.js';
import { requestUploadRoutes } from './uploads/routes.js';
import { tusRoutes } from './tus/routes.js';
import type { DirectUploads } from './direct/uploads.js';
import { directRoutes } from './direct/routes.js';
import { requestTusScope } from './tus/request-scope.js';
import type { AuthState } from './http/auth.js';
import type { Middleware } from 'koa';

export interface AppDeps {
  accounts: AccountService;
  files: FileService;
  uploads: PlainUploads;
  /** Files' public links, and downloads through them. */
  links: LinkService;
  /** Resumable uploads (tus) under /api/v1/uploads. */
  resumable?: ResumableUploads;
  direct?: DirectUploads;
  /** The account's keys under /api/v1/keys. */
  keys?: ApiKeys;
  /** The audit trail under /api/v1/audit, and AUDIT_FULL_ADDRESSES. */
  audit?: { trail: AuditTrail; fullAddresses: boolean; downloads?: boolean };
  /** The account's webhooks under /api/v1/webhooks. */
  webhooks?: WebhookEndpoints;
  /** File requests: the owner's routes under /api/v1/requests, the outsider's under /r/{token}, with their per-address limits. */
  requests?: { service: FileRequests; limits: RequestLinkLimits; live: LiveRequestUploads; uploadExpirySeconds: number };
  uploadGate: UploadGate;
  /** Uploads per account at once (the plan's concurrent_uploads). */
  concurrencySlots: ConcurrencySlots;
  /** Slowest upload body accepted (UPLOAD_MIN_RATE, UPLOAD_RATE_WINDOW). */
  bodyRate: BodyRateOptions;
  /** DOWNLOAD_MIN_RATE over DOWNLOAD_RATE_WINDOW: slower readers are cut. */
  downloadRate?: BodyRateOptions;
  requestLimits: RequestLimits;
  /** Requests in progress per account on this instance (ACCOUNT_REQUESTS_IN_FLIGHT). */
  requestsInFlight: RequestsInFlight;
  /** BODY_TIMEOUT in milliseconds: a JSON body not all here by then is 408 body_timeout. */
  bodyTimeoutMs: number;
  authFailures: FailureLimits;
  tokenFailures: FailureLimits;
  /** Wrong passwords per download link, from all addresses. */
  passwordFailures: FailureLimits;
  metrics: Metrics;
  logger: Logger;
  /** Base of public download links, without a trailing slash. */
  publicUrl: string;
  /** Client addresses from X-Forwarded-For: from every peer, or only from trustedProxies' when they are given. */
  trustProxy?: boolean;
  /** The proxies (addresses, CIDR ranges) whose X-Forwarded-For is believed, when TRUST_PROXY lists them. */
  trustedProxies?: readonly string[];
  /** Told when a request with X-Forwarded-For came from a peer outside trustedProxies. */
  onUntrustedForward?: (peer: string) => void;
  /** CLIENT_IPV6_PREFIX (default 64): an IPv6 client is its network of that many bits. */
  clientIpv6Prefix?: number;
  /** How many X-Forwarded-For entries, from the right, our proxies wrote (default 1): the leftmost of them is the client. */
  trustedProxyHops?: number;
  /** Origins allowed by CORS: none by default, `*` for any. */
  corsOrigins?: string[];
  /** Readiness of the dependencies, for /readyz. */
  readiness: () => Promise<Readiness>;
}

// server.ts reads the type from here.
export type { Readiness } from './health/readiness.js';

/** The public listener: the versioned API and download links. Does not listen. */
export function createApp(deps: AppDeps): Koa {
  const { accounts, files, links, uploadGate, requestLimits, authFailures, tokenFailures, metrics, logger, publicUrl } = deps;
  // Koa's own proxy setting stays off: clientAddress alone reads X-Forwarded-For.
  const app = new Koa();
  // Errors before the headers are answered and logged by errorResponses;
  // the ones after (a download's store stream failing) arrive here.
  app.on('error', lateErrors(logger, metrics));
  const api = apiRoutes({ accounts, files, links, uploads: deps.uploads, uploadGate, concurrencySlots: deps.concurrencySlots, bodyRate: deps.bodyRate, requestLimits, authFailures, requestsInFlight: deps.requestsInFlight, bodyTimeoutMs: deps.bodyTimeoutMs, metrics, publicUrl, resumable: deps.resumable, direct: deps.direct, webhooks: deps.webhooks, requests: deps.requests?.service, keys: deps.keys, audit: deps.audit });
  const downloads = downloadRoutes({ downloads: links.downloads, tokenFailures, passwordFailures: deps.passwordFailures, metrics, rate: deps.downloadRate, onCountError: (err) => logger.error({ err }, 'download count failed'), corsOrigins: deps.corsOrigins?.filter((origin) => origin !== '*'), auditAddress: deps.audit?.downloads ? (ip) => truncateAddress(ip, deps.audit!.fullAddresses) : undefined });
  app.use(clientAddress({
    trust: deps.trustProxy ? (deps.trustedProxies ?? 'all') : 'none',
    hops: deps.trustedProxyHops ?? 1,
    ipv6Prefix: deps.clientIpv6Prefix ?? 64,
    onUntrustedForward: deps.onUntrustedForward,
  }));
  app.use(requestLog(logger, metrics, { quietRoutes: HEALTH_PATHS }));
  app.use(errorResponses(logger, metrics));
  app.use(singleHeaders());
  if (deps.corsOrigins?.length) app.use(corsFor(deps.corsOrigins));
  app.use(api.routes()).use(api.allowedMethods());
  app.use(downloads.routes()).use(downloads.allowedMethods());
  if (deps.requests) {
    // /r/{token}: the request's guard and page, and the transports' routes behind the same guard.
    const { service: requests, live, uploadExpirySeconds } = deps.requests;
    const { router: requestLinks, guard } = requestLinkRoutes({ requests, limits: deps.requests.limits, tokenFailures, passwordFailures: deps.passwordFailures, metrics, publicUrl, fullAddresses: deps.audit?.fullAddresses });
    const transport = { uploadGate, concurrencySlots: deps.concurrencySlots, bodyRate: deps.bodyRate, metrics };
    requestLinks.use(requestUploadRoutes(guard, { ...transport, uploads: deps.uploads, live, uploadExpirySeconds }).routes());
    if (deps.direct) {
      const direct = directRoutes(() => guard as Middleware<AuthState>, { direct: deps.direct, publicUrl, bodyTimeoutMs: deps.bodyTimeoutMs, metrics }, { uploadExpirySeconds, now: requests.clock });
      requestLinks.use('/uploads', direct.routes());
    }
    if (deps.resumable) {
      const scope = requestTusScope({ requests, live, uploadExpirySeconds, publicUrl });
      // The link's guard stands for the key's: every tus request through the link passes it, whatever the scope.
      const tus = tusRoutes(() => guard as Middleware<AuthState>, { ...transport, resumable: deps.resumable, publicUrl, scope });
      requestLinks.use('/uploads', tus.routes());
    }
    app.use(requestLinks.routes()).use(requestLinks.allowedMethods());
  }
  app.use(healthRoutes(deps.readiness).routes());
  // Each operation's scope as the API's routes declare it (src/http/scoped.ts).
  const docs = docsRoutes(publicUrl, () => declaredScopes(api, API_PREFIX));
  app.use(docs.routes()).use(docs.allowedMethods());
  const web = webAppRoutes();
  app.use(web.routes()).use(web.allowedMethods());
  const home = homeRoute(publicUrl);
  app.use(home.routes()).use(home.allowedMethods());
  return app;
}

/**
 * CORS for browser clients of configured origins. Keys travel in the
 * Authorization header, never in cookies, so credentials stay off.
 */
function corsFor(origins: string[]) {
  return cors({
    origin: (ctx) => (origins.includes('*') ? '*' : origins.includes(ctx.get('Origin')) ? ctx.get('Origin') : ''),
    allowMethods: ['GET', 'HEAD', 'POST', 'DELETE', 'PATCH'],
    allowHeaders: ['Authorization', 'Content-Type', 'Range', 'If-None-Match', 'X-Request-Id', ...TUS_REQUEST_HEADERS],
    exposeHeaders: ['Content-Disposition', 'Content-Range', 'ETag', 'Retry-After', 'X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit', 'RateLimit-Policy', ...TUS_RESPONSE_HEADERS],
    maxAge: 600,
  });
}

export interface AdminAppDeps {
  accounts: AccountService;
  plans: PlanService;
  logger: Logger;
  adminToken: string;
  /** Wrong admin tokens per client address. */
  adminFailures?: FailureLimits;
  metrics: Metrics;
  /** One sweep of pending objects and a recount of the file counters (for `dropstream gc`). */
  sweep: (graceSeconds?: number) => Promise<GcResult>;
  /** What the sweep's walk over the store's objects would remove (for `dropstream gc --check`). */
  checkOrphans: (graceSeconds?: number) => Promise<OrphanCheckResult>;
  /** CLIENT_IPV6_PREFIX (default 64), for the wrong-token limit per client. */
  clientIpv6Prefix?: number;
  /** BODY_TIMEOUT in milliseconds, for the admin API's JSON bodies. */
  bodyTimeoutMs: number;
}

/** The admin listener: provisioning of accounts, keys and plans. Does not listen. */
export function createAdminApp({ accounts, plans, logger, adminToken, adminFailures, metrics, sweep, checkOrphans, clientIpv6Prefix = 64, bodyTimeoutMs }: AdminAppDeps): Koa {
  const app = new Koa();
  app.on('error', lateErrors(logger));
  const admin = adminRoutes({ accounts, plans, metrics, sweep, checkOrphans });
  // No proxy stands in front of the admin listener: its peers are its clients.
  app.use(clientAddress({ trust: 'none', hops: 1, ipv6Prefix: clientIpv6Prefix }));
  app.use(requestLog(logger));
  app.use(errorResponses(logger));
  app.use(singleHeaders());
  // First, before the body is read and before a route is matched.
  app.use(requireAdminToken(adminToken, adminFailures, metrics));
  app.use(jsonBody({ limit: '64kb', invalid: () => badRequest('invalid_json', 'The body must be a JSON object'), timeoutMs: bodyTimeoutMs }));
  app.use(admin.routes()).use(admin.allowedMethods());
  return app;
}
