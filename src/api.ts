// The versioned API: everything under /api/v1 needs an API key. One guard
// (src/http/auth.ts: the key, the plan, the rate limits) and the key's scope
// (src/http/scoped.ts) on every route; each feature's routes are a router
// of its own, mounted here under its prefix.
import Router from '@koa/router';
import type { AccountService } from './accounts/service.js';
import type { FileService } from './files/service.js';
import { fileRoutes, statsRoutes } from './files/routes.js';
import { linkRoutes } from './files/link-routes.js';
import type { LinkService } from './links/service.js';
import type { PlainUploads } from './uploads/service.js';
import { uploadRoutes } from './uploads/routes.js';
import type { UploadGate } from './limits/upload-gate.js';
import type { ConcurrencySlots } from './limits/concurrent-uploads.js';
import type { BodyRateOptions } from './http/body-rate.js';
import { apiGuard, type AuthState } from './http/auth.js';
import { scopedGuard } from './http/scoped.js';
import type { ApiKeys } from './keys/api-keys.js';
import { keyRoutes } from './keys/routes.js';
import type { AuditTrail } from './trail/trail.js';
import { auditRoutes } from './trail/routes.js';
import type { FailureLimits } from './limits/failure-limits.js';
import type { RequestLimits } from './limits/request-limits.js';
import type { RequestsInFlight } from './limits/requests-in-flight.js';
import type { Metrics } from './metrics.js';
import type { ResumableUploads } from './tus/uploads.js';
import { tusRoutes } from './tus/routes.js';
import type { DirectUploads } from './direct/uploads.js';
import { directRoutes } from './direct/routes.js';
import type { WebhookEndpoints } from './webhooks/endpoints.js';
import { webhookRoutes } from './webhooks/routes.js';
import type { FileRequests } from './requests/service.js';
import { requestRoutes } from './requests/routes.js';

export interface ApiDeps {
  accounts: AccountService;
  files: FileService;
  uploads: PlainUploads;
  links: LinkService;
  uploadGate: UploadGate;
  /** The plan's concurrent_uploads, per account. */
  concurrencySlots: ConcurrencySlots;
  /** UPLOAD_MIN_RATE over UPLOAD_RATE_WINDOW: slower bodies are cut with 408. */
  bodyRate: BodyRateOptions;
  requestLimits: RequestLimits;
  /** Failed authentications per client address. */
  authFailures: FailureLimits;
  /** Requests in progress per account on this instance (ACCOUNT_REQUESTS_IN_FLIGHT). */
  requestsInFlight: RequestsInFlight;
  /** BODY_TIMEOUT in milliseconds: JSON bodies arrive within it, or 408. */
  bodyTimeoutMs: number;
  metrics?: Metrics;
  /** Base of public download links, without a trailing slash. */
  publicUrl: string;
  /** Resumable uploads (tus); absent: no /uploads routes. */
  resumable?: ResumableUploads;
  /** Uploads straight to the store (their routes answer 404 direct_uploads_off without S3_DIRECT_UPLOADS). */
  direct?: DirectUploads;
  /** The account's webhooks; absent: no /webhooks routes. */
  webhooks?: WebhookEndpoints;
  /** The account's file requests; absent: no /requests routes. */
  requests?: FileRequests;
  /** The account's keys as the owner manages them; absent: no /keys routes. */
  keys?: ApiKeys;
  /** The audit trail (GET /audit), and whether it keeps client addresses whole (AUDIT_FULL_ADDRESSES). */
  audit?: { trail: AuditTrail; fullAddresses: boolean };
}

/** Where the versioned API is mounted. */
export const API_PREFIX = '/api/v1';

/** The versioned API's router, every feature's routes mounted under /api/v1. */
export function apiRoutes({ accounts, files, links, uploads, uploadGate, concurrencySlots, bodyRate, requestLimits, authFailures, requestsInFlight, bodyTimeoutMs, metrics, publicUrl, resumable, direct, webhooks, requests, keys, audit }: ApiDeps) {
  const router = new Router<AuthState>({ prefix: API_PREFIX });
  // On each route rather than router.use(), so logs and metrics name the
  // route even when a request is refused before reaching it.
  // need(scope): the guard, then the key's scope (scoped.ts); every route names the scope it needs.
  const need = scopedGuard(
    apiGuard({
      accounts,
      requestLimits,
      authFailures,
      inFlight: requestsInFlight,
      uploadsAllowed: (plan) => concurrencySlots.limitOf(plan.concurrentUploads),
      metrics,
      fullAddresses: audit?.fullAddresses,
    }),
  );
  // The upload's path first: /files/upload is never a file id.
  router.use('/files', uploadRoutes(need, { uploads, uploadGate, concurrencySlots, bodyRate, metrics, publicUrl }).routes());
  router.use('/files', linkRoutes(need, { links, publicUrl, bodyTimeoutMs }).routes());
  router.use('/files', fileRoutes(need, { files, publicUrl }).routes());
  router.use(statsRoutes(need, { files, concurrencySlots }).routes());
  // Before tus's: /uploads/direct is not a tus upload's id.
  if (direct) router.use('/uploads', directRoutes(need, { direct, publicUrl, bodyTimeoutMs, metrics }).routes());
  if (resumable) router.use('/uploads', tusRoutes(need, { resumable, uploadGate, concurrencySlots, bodyRate, metrics, publicUrl }).routes());
  if (webhooks) router.use('/webhooks', webhookRoutes(need, { webhooks, bodyTimeoutMs }).routes());
  if (requests) router.use('/requests', requestRoutes(need, { requests, publicUrl, bodyTimeoutMs }).routes());
  if (keys) router.use('/keys', keyRoutes(need, { keys, bodyTimeoutMs }).routes());
  if (audit) router.use('/audit', auditRoutes(need, audit.trail).routes());
  return router;
}
