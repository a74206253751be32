// The outsider's side of a file request (issue 45): no API key, the link's
// token (and its password, when it has one) is the credential. Every route
// passes one guard: the address's limits (request-link-limits.ts), the
// token resolved to the open request and its owner, the password. Uploads
// are the owner's (its caller, with max_file_size narrowed to the
// request's) through the same services as /api/v1: the plain upload and tus
// (tus-routes.ts with a scope); each takes a place of the request
// (src/requests/places.ts) before any byte is read.
import { SYSTEM, truncateAddress } from '../audit/actor.js';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { ConcurrencySlots } from '../limits/concurrent-uploads.js';
import type { ResumableUploads } from '../tus/uploads.js';
import type { PlainUploads } from '../uploads/service.js';
import type { UploadGate } from '../limits/upload-gate.js';
import { withRetention } from '../files/upload-options.js';
import { AppError } from '../errors.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { RequestLinkLimits } from '../limits/request-link-limits.js';
import type { Metrics } from '../metrics.js';
import { requestErrors } from '../requests/errors.js';
import type { LiveRequestUploads } from '../requests/live-uploads.js';
import type { FileRequest, FileRequests } from '../requests/service.js';
import type { AuthState } from './auth.js';
import type { BodyRateOptions } from './body-rate.js';
import { sameOriginWrites } from './cross-site.js';
import { basicPassword } from './download-route.js';
import { guardedPasswordCheck, type PasswordGuard } from '../links/download.js';
import { passwordGuard } from './password-guard.js';
import { receivePlainUpload } from './plain-upload.js';
import { tooManyFailures } from './rate-limit.js';
import { refusalAsPage, requestPage } from './request-page.js';
import { tusRoutes } from './tus-routes.js';

export interface RequestLinkDeps {
  /** AUDIT_FULL_ADDRESSES: the audit keeps the outsider's address whole rather than its /24 or /48. */
  fullAddresses?: boolean;
  requests: FileRequests;
  /** Uploads in flight through requests, cut when their request is closed or expires, or at their deadline. */
  live: LiveRequestUploads;
  /** Seconds an upload through a request may take, from its start (a tus upload: its creation) to its file: REQUEST_UPLOAD_EXPIRY. */
  uploadExpirySeconds: number;
  uploads: PlainUploads;
  resumable?: ResumableUploads;
  uploadGate: UploadGate;
  concurrencySlots: ConcurrencySlots;
  bodyRate: BodyRateOptions;
  limits: RequestLinkLimits;
  /** Unknown tokens and wrong passwords per client address (shared with download links). */
  tokenFailures: FailureLimits;
  /** Wrong passwords per request, from all addresses (the limiter of download links' passwords, keyed apart). */
  passwordFailures: FailureLimits;
  metrics?: Metrics;
  publicUrl: string;
}

/** The owner as the caller (AuthState), and the request the link opened. */
export interface RequestLinkState extends AuthState {
  fileRequest: FileRequest;
}

const limited = (seconds: number) =>
  new AppError('request_link_limited', 'Too many requests or uploads from this address through file request links; try again later', { 'Retry-After': String(seconds) });

/**
 * The request's password from `Authorization: Basic`, under the limits of a
 * download link's (password-guard.ts): the address's failures and the
 * request's wrong passwords from all addresses, counted before the check. A
 * password verified lately costs no scrypt (a page's every tus request
 * carries it), as for links.
 */
async function checkPassword(authorization: string | undefined, hash: string, requestId: string, guard: PasswordGuard): Promise<void> {
  const password = basicPassword(authorization);
  if (password === undefined) throw requestErrors.passwordRequired();
  // Keyed apart from link ids (UUIDs) in the per-link limiter they share.
  if (!(await guardedPasswordCheck(password, hash, `request:${requestId}`, guard))) throw requestErrors.wrongPassword();
}

/** The guard of every /r/ route; see the top of this file. */
function linkGuard({ requests, limits, tokenFailures, passwordFailures, metrics, fullAddresses = false }: RequestLinkDeps): Middleware<RequestLinkState> {
  return async (ctx, next) => {
    const address = ctx.ip;
    // A Redis that fails lets the request go on, as the other limits do; the owner's plan still bounds it.
    const wait = (await limits.request(address).catch(() => 0)) || (ctx.method === 'POST' ? await limits.upload(address).catch(() => 0) : 0);
    if (wait > 0) {
      metrics?.rateLimitRefusals.inc({ reason: 'request_link' });
      throw limited(wait);
    }
    const failedWait = await tokenFailures.waitSeconds(address).catch(() => 0);
    if (failedWait > 0) throw tooManyFailures(tokenFailures, failedWait, metrics);
    let open;
    try {
      open = await requests.open((ctx.params as { token?: string }).token ?? '');
    } catch (err) {
      // Unknown tokens count as unknown download links do: guessing is throttled per address.
      if (err instanceof AppError && err.code === 'request_not_found') await tokenFailures.fail(address).catch(() => 0);
      throw err;
    }
    if (open.passwordHash !== null) await checkPassword(ctx.get('Authorization') || undefined, open.passwordHash, open.request.id, passwordGuard({ address: tokenFailures, link: passwordFailures, metrics }, address));
    // The owner's limits; for the audit trail, the outsider through this request's link (src/audit/actor.ts).
    ctx.state.caller = { ...open.owner, actor: { ...SYSTEM, kind: 'request', requestId: open.request.id, address: truncateAddress(address, fullAddresses) } };
    ctx.state.fileRequest = open.request;
    await next();
  };
}

/** /r/{token}: the page, the plain upload and tus. */
export function requestLinkRoutes(deps: RequestLinkDeps) {
  const { requests, live, uploadExpirySeconds, uploads, resumable, uploadGate, concurrencySlots, bodyRate, metrics, publicUrl } = deps;
  const router = new Router<RequestLinkState>({ prefix: '/r/:token' });
  const guard = linkGuard(deps);
  const basePath = new URL(publicUrl).pathname.replace(/\/+$/, '');
  // First, so it runs before every route below (tus's included): no limit, password or byte for another site's page.
  router.use(sameOriginWrites(publicUrl));

  router.get('/', refusalAsPage, guard, async (ctx) => {
    const { fileRequest } = ctx.state;
    // Received files only: places held by uploads in flight may still be given back.
    if (fileRequest.maxFiles !== null && fileRequest.filesReceived >= fileRequest.maxFiles) throw requestErrors.full(fileRequest.maxFiles);
    return requestPage(ctx, fileRequest);
  });

  /** The latest an upload through `request` starting now may end: REQUEST_UPLOAD_EXPIRY from now, never past the request's expiry. */
  const deadlineOf = (request: FileRequest) => new Date(Math.min(requests.clock().getTime() + uploadExpirySeconds * 1000, request.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY));

  router.post('/files', guard, async (ctx) => {
    const { caller, fileRequest } = ctx.state;
    // Cut when the request is closed or expires, or at REQUEST_UPLOAD_EXPIRY (410 upload_expired).
    const tracked = live.track(fileRequest.id, { requestExpiresAt: fileRequest.expiresAt, uploadDeadline: new Date(Date.now() + uploadExpirySeconds * 1000) });
    let file;
    try {
      file = await receivePlainUpload(ctx.req, caller, { uploads, uploadGate, concurrencySlots, bodyRate, metrics }, {
        // The outsider's fields (expires_in, password, ...) are not theirs to set on the owner's file: the plan's retention applies.
        options: () => withRetention({}, caller.plan.maxExpiresIn),
        // The place before the first byte (the intake's open): a full request reads no body.
        requestId: fileRequest.id,
        stop: tracked.signal,
      });
    } finally {
      tracked.done();
    }
    ctx.status = 201;
    // A receipt: no file id, no download link (those are the owner's).
    ctx.body = { success: true, filename: file.filename, size: file.size };
  });

  if (resumable) {
    tusRoutes(router as unknown as Router<AuthState>, () => guard as unknown as Middleware<AuthState>, {
      resumable,
      uploadGate,
      concurrencySlots,
      bodyRate,
      metrics,
      publicUrl,
      scope: {
        base: (ctx) => `${basePath}/r/${(ctx.state as RequestLinkState).fileRequest.token}/uploads`,
        // The place is taken as the upload opens, before its store state exists (the intake's open).
        requestId: (ctx) => (ctx.state as RequestLinkState).fileRequest.id,
        owns: async (ctx, id) => {
          if (!(await requests.ownsUpload((ctx.state as RequestLinkState).fileRequest.id, id))) throw new AppError('upload_not_found', 'No such upload through this file request');
        },
        // Its place, slot and bytes are held REQUEST_UPLOAD_EXPIRY at most, however often it is written (src/tus/uploads.ts cuts a PATCH then).
        deadline: (ctx) => deadlineOf((ctx.state as RequestLinkState).fileRequest),
        // The upload's own deadline covers the request's expiry: tracked for the close (and, as a backstop, the expiry).
        track: (ctx) => live.track((ctx.state as RequestLinkState).fileRequest.id),
      },
    });
  }
  return router;
}
