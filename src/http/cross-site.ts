// Requests another site's page made a browser send (issue 50, item 3). A
// link's password is HTTP Basic, which a browser caches once answered and
// then sends again on its own, whoever's page asks: a form on another site
// posting to /r/{token}/files planted a file in the owner's account with
// the visitor's cached password. Browsers say where a request comes from:
// Sec-Fetch-Site (sent to https and loopback origins: same-origin,
// same-site, cross-site, or none for one the user started) and Origin (on
// every POST, PATCH and DELETE, plain http included). curl and tus clients
// send neither, and are not refused.
import type { Context, Middleware } from 'koa';
import { AppError } from '../errors.js';

const WRITES = new Set(['POST', 'PATCH', 'DELETE']);

export const crossSiteRefused = () =>
  new AppError('cross_site_request', 'A page of another site may not send this request with your browser\'s credentials; open the link itself');

/**
 * Whether `origin` (an Origin header) is the service's own: PUBLIC_URL's
 * origin, or an origin on the host (and port) the request was sent to. The
 * scheme of the second is not compared: behind a proxy that ends TLS the
 * browser's origin is https and ours is http. A page can only name the
 * request's own host as its origin by being served from that host, and a
 * site that rebinds its own name to our address gets its own origin's
 * credentials, not ours; so PUBLIC_URL need not be set right (behind a
 * proxy that keeps Host) for the upload page to work.
 */
function ownOrigin(origin: string, publicOrigin: string, ctx: Context): boolean {
  if (origin === publicOrigin) return true;
  try {
    return new URL(origin).host === ctx.get('Host').toLowerCase();
  } catch {
    return false;
  }
}

/**
 * Whether a write comes from another site's page: Sec-Fetch-Site other
 * than same-origin or none, or an Origin that is not ours. `Origin: null`
 * (a page with Referrer-Policy no-referrer, a sandboxed frame, a data: URL)
 * is ours only when the browser says same-origin: any site can make its
 * posts say null.
 */
export function fromAnotherSite(ctx: Context, publicOrigin: string): boolean {
  const site = ctx.get('Sec-Fetch-Site');
  if (site && site !== 'same-origin' && site !== 'none') return true;
  const origin = ctx.get('Origin');
  if (!origin) return false;
  if (origin === 'null') return site !== 'same-origin';
  return !ownOrigin(origin, publicOrigin, ctx);
}

/**
 * Refuses writes (POST, PATCH, DELETE) from another site's page with 403
 * `cross_site_request`: mounted first, before any limit, password check or
 * byte of the body. Reads (GET, HEAD, OPTIONS) pass: they change nothing.
 */
export function sameOriginWrites(publicUrl: string): Middleware {
  const publicOrigin = new URL(publicUrl).origin;
  return async (ctx, next) => {
    if (WRITES.has(ctx.method) && fromAnotherSite(ctx, publicOrigin)) throw crossSiteRefused();
    await next();
  };
}

/**
 * Whether a GET is another site's page using the browser (an image, a
 * frame, a video, a fetch) rather than the user following a link from
 * another site (a mail, a chat: a top-level navigation, Sec-Fetch-Mode
 * navigate and Sec-Fetch-Dest document). Only browsers that send
 * Sec-Fetch-Site are told apart; an Origin in `trusted` (CORS_ORIGINS,
 * listed by name) is a client the operator allowed.
 */
export function embeddedByAnotherSite(ctx: Context, trusted: readonly string[] = []): boolean {
  const site = ctx.get('Sec-Fetch-Site');
  if (site !== 'cross-site' && site !== 'same-site') return false;
  if (ctx.get('Sec-Fetch-Mode') === 'navigate' && ctx.get('Sec-Fetch-Dest') === 'document') return false;
  const origin = ctx.get('Origin');
  return !(origin && trusted.includes(origin));
}
