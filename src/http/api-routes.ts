import Router from '@koa/router';
import type { AccountService } from '../accounts/service.js';
import { AppError, badRequest } from '../errors.js';
import type { FileService } from '../files/service.js';
import type { LinkService } from '../links/service.js';
import type { PlainUploads } from '../uploads/service.js';
import type { UploadGate } from '../limits/upload-gate.js';
import type { ConcurrencySlots } from '../limits/concurrent-uploads.js';
import { MAX_FILE_ID } from '../files/file-rows.js';
import { fileIdParam } from '../files/schemas.js';
import type { BodyRateOptions } from './body-rate.js';
import { apiGuard, type AuthState } from './auth.js';
import { scopedGuard, unscoped } from './scoped.js';
import type { ApiKeys } from '../accounts/api-keys.js';
import { keyRoutes } from './key-routes.js';
import type { AuditTrail } from '../audit/trail.js';
import { auditRoutes } from './audit-routes.js';
import { receivePlainUpload } from './plain-upload.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { RequestLimits } from '../limits/request-limits.js';
import type { RequestsInFlight } from '../limits/requests-in-flight.js';
import type { Metrics } from '../metrics.js';
import { parseUploadOptions, withRetention } from '../files/upload-options.js';
import { presentFile, presentUpload } from './present.js';
import type { ResumableUploads } from '../tus/uploads.js';
import { tusRoutes } from './tus-routes.js';
import { pagination, parseListQuery } from './list-query.js';
import { linkRoutes } from './link-routes.js';
import type { WebhookEndpoints } from '../webhooks/endpoints.js';
import { webhookRoutes } from './webhook-routes.js';
import type { FileRequests } from '../requests/service.js';
import { requestRoutes } from './request-routes.js';

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
  /** The account's webhooks; absent: no /webhooks routes. */
  webhooks?: WebhookEndpoints;
  /** The account's file requests; absent: no /requests routes. */
  requests?: FileRequests;
  /** The account's keys as the owner manages them; absent: no /keys routes. */
  keys?: ApiKeys;
  /** The audit trail (GET /audit), and whether it keeps client addresses whole (AUDIT_FULL_ADDRESSES). */
  audit?: { trail: AuditTrail; fullAddresses: boolean };
}

function parseFileId(raw: string): number {
  const result = fileIdParam.safeParse(raw);
  if (!result.success) throw badRequest('invalid_file_id', `file_id must be an integer from 1 to ${MAX_FILE_ID}`);
  return result.data;
}

/** The versioned API: everything under /api/v1 needs an API key. */
export function apiRoutes({ accounts, files, links, uploads, uploadGate, concurrencySlots, bodyRate, requestLimits, authFailures, requestsInFlight, bodyTimeoutMs, metrics, publicUrl, resumable, webhooks, requests, keys, audit }: ApiDeps) {
  const router = new Router<AuthState>({ prefix: '/api/v1' });
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

  router.post('/files/upload', need('files:write'), async (ctx) => {
    const { caller } = ctx.state;
    const file = await receivePlainUpload(ctx.req, caller, { uploads, uploadGate, concurrencySlots, bodyRate, metrics }, {
      options: (fields) => withRetention(parseUploadOptions(fields), caller.plan.maxExpiresIn),
    });
    ctx.status = 201;
    ctx.body = presentUpload(file, publicUrl);
  });

  // The upload path is never a file id: any other method there is 405, before the key is checked.
  router.all('/files/upload', unscoped('405 before the key is checked'), (ctx, next) => {
    if (ctx.method === 'POST') return next();
    throw new AppError('method_not_allowed', 'Method not allowed', { Allow: 'POST' });
  });

  linkRoutes(router, need, { links, publicUrl, parseFileId, bodyTimeoutMs });

  if (webhooks) webhookRoutes(router, need, { webhooks, bodyTimeoutMs });

  if (requests) requestRoutes(router, need, { requests, publicUrl, bodyTimeoutMs });

  if (keys) keyRoutes(router, need, { keys, bodyTimeoutMs });

  if (audit) auditRoutes(router, need, audit.trail);

  if (resumable) tusRoutes(router, need, { resumable, uploadGate, concurrencySlots, bodyRate, metrics, publicUrl });

  router.get('/files', need('files:read'), async (ctx) => {
    const { page, limit } = parseListQuery(ctx.query);
    // The items come as JSON text from the database (FileService.pageJson): passed through, not parsed.
    const { filesJson, total } = await files.pageJson(ctx.state.caller.accountId, page, limit, publicUrl);
    ctx.type = 'json';
    ctx.body = `{"success":true,"files":${filesJson},"pagination":${JSON.stringify(pagination(page, limit, total))}}`;
  });

  router.get('/files/:id', need('files:read'), async (ctx) => {
    const file = await files.get(ctx.state.caller.accountId, parseFileId(ctx.params.id!));
    ctx.body = { success: true, file: presentFile(file, publicUrl) };
  });

  router.delete('/files/:id', need('files:delete'), async (ctx) => {
    await files.delete(ctx.state.caller.accountId, parseFileId(ctx.params.id!), ctx.state.caller.actor);
    ctx.body = { success: true, message: 'File deleted successfully' };
  });

  router.get('/stats', need('stats:read'), async (ctx) => {
    const { accountId, plan } = ctx.state.caller;
    const stats = await files.stats(accountId);
    ctx.body = {
      success: true,
      // reserved_size beside the spec's two: what uploads in progress hold against max_total_size (docs/decisions.md).
      stats: { total_files: stats.totalFiles, total_size: stats.totalSize, reserved_size: stats.reservedSize },
      limits: {
        max_file_size: plan.maxFileSize,
        daily_uploads: plan.dailyUploads,
        // What applies: a plan without its own cap has the instance default.
        concurrent_uploads: concurrencySlots.limitOf(plan.concurrentUploads),
        max_total_size: plan.maxTotalSize,
        max_expires_in: plan.maxExpiresIn,
      },
      plan: plan.name.toLowerCase(),
    };
  });

  return router;
}
