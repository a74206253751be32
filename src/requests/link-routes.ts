// The outsider's side of a file request (issue 45): no API key, the link's
// token (and its password, when it has one) is the credential. Every route
// under /r/{token} passes one guard: the address's limits
// (request-link-limits.ts), the token resolved to the open request and its
// owner, the password. This router holds the guard and the page; the
// uploads are the transports' own routes, mounted on it by the app
// (src/app.ts): the plain upload (src/uploads/routes.ts) and tus
// (src/tus/routes.ts with the request's scope, src/tus/request-scope.ts).
// They are the owner's uploads (its caller, with max_file_size narrowed to
// the request's), and the intake takes a place of the request for each
// before any byte is read.
import { SYSTEM, truncateAddress } from '../audit/actor.js';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { RequestLinkLimits } from '../limits/request-link-limits.js';
import type { Metrics } from '../metrics.js';
import { requestErrors } from './errors.js';
import type { FileRequests, RequestLinkState } from './service.js';
import { sameOriginWrites } from '../http/cross-site.js';
import { basicPassword } from '../http/auth.js';
import { guardedPasswordCheck, type PasswordGuard } from '../links/download.js';
import { passwordGuard } from '../downloads/password-guard.js';
import { tooManyFailures } from '../http/rate-limit.js';
import { refusalAsPage, requestPage } from './page.js';

export interface RequestLinkDeps {
  /** AUDIT_FULL_ADDRESSES: the audit keeps the outsider's address whole rather than its /24 or /48. */
  fullAddresses?: boolean;
  requests: FileRequests;
  limits: RequestLinkLimits;
  /** Unknown tokens and wrong passwords per client address (shared with download links). */
  tokenFailures: FailureLimits;
  /** Wrong passwords per request, from all addresses (the limiter of download links' passwords, keyed apart). */
  passwordFailures: FailureLimits;
  metrics?: Metrics;
  publicUrl: string;
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

/**
 * Whether a request through a link starts an upload (REQUEST_LINK_UPLOADS_PER_HOUR
 * counts these): a plain upload, a tus creation, a direct upload's creation;
 * not the requests that go on with one (a PATCH, a direct upload's part
 * signatures and complete), which its own upload's place already bounds.
 */
const startsUpload = (method: string, path: string) => method === 'POST' && /^\/r\/[^/]+\/(files|uploads|uploads\/direct)\/?$/.test(path);

/** The guard of every /r/ route; see the top of this file. */
export function requestLinkGuard({ requests, limits, tokenFailures, passwordFailures, metrics, fullAddresses = false }: RequestLinkDeps): Middleware<RequestLinkState> {
  return async (ctx, next) => {
    const address = ctx.ip;
    // A Redis that fails lets the request go on, as the other limits do; the owner's plan still bounds it.
    const wait = (await limits.request(address).catch(() => 0)) || (startsUpload(ctx.method, ctx.path) ? await limits.upload(address).catch(() => 0) : 0);
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

/**
 * /r/{token}: the page; the app mounts the uploads' routes on the same
 * router, behind `guard`.
 */
export function requestLinkRoutes(deps: RequestLinkDeps): { router: Router<RequestLinkState>; guard: Middleware<RequestLinkState> } {
  const { publicUrl } = deps;
  const router = new Router<RequestLinkState>({ prefix: '/r/:token' });
  const guard = requestLinkGuard(deps);
  // First, so it runs before every route below (tus's included): no limit, password or byte for another site's page.
  router.use(sameOriginWrites(publicUrl));

  router.get('/', refusalAsPage, guard, async (ctx) => {
    const { fileRequest } = ctx.state;
    // Received files only: places held by uploads in flight may still be given back.
    if (fileRequest.maxFiles !== null && fileRequest.filesReceived >= fileRequest.maxFiles) throw requestErrors.full(fileRequest.maxFiles);
    return requestPage(ctx, fileRequest);
  });
  return { router, guard };
}
