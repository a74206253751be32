import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { wasCutByServer } from './server-cut.js';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export interface RequestLogOptions {
  /**
   * Route patterns logged at debug instead of info: health probes, which
   * load balancers and Docker's HEALTHCHECK send every few seconds.
   */
  quietRoutes?: readonly string[];
}

/**
 * Bytes of each connection that earlier requests on it have already
 * accounted for. Node reads a request (often its whole body) before any
 * middleware runs, so the socket's counters at the start of a request
 * already include it; counting from where the previous request on the
 * connection stopped does not miss it.
 */
const accounted = new WeakMap<Socket, { read: number; written: number }>();

// Keys in ctx.state.
const REQUEST_ID_KEY = 'requestId';
const FAILED_STATUS_KEY = 'failedStatus';

/** The id of the request, as logged and sent back in X-Request-Id. */
export const requestIdOf = (ctx: Context): string | undefined => ctx.state[REQUEST_ID_KEY];

/** The route pattern (never the URL: a download URL carries its link token). */
export const routeOf = (ctx: Context): string => (typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched');

/** A response cut by our own failure after its headers were sent is logged with `status`, not as a client that left. */
export function recordFailure(ctx: Context, status: number): void {
  ctx.state[FAILED_STATUS_KEY] = status;
}

/**
 * One log line and one metrics sample per request, written when the
 * response closes. Both name the route pattern, never the URL. The status is
 * what the client received in full: 'finish' means every byte of the response
 * was handed to the connection without an error; without it, 499 (as nginx
 * logs it: the client left first), 503 when a shutdown cut the connection at
 * the end of its grace period (the server ended it; a proxy answered its
 * client 502), or the status of our own failure.
 */
export function requestLog(logger: Logger, metrics?: Metrics, { quietRoutes = [] }: RequestLogOptions = {}): Middleware {
  const quiet = new Set(quietRoutes);
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const { res } = ctx;
    const socket = ctx.req.socket;
    const given = ctx.get('X-Request-Id');
    const id = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.state[REQUEST_ID_KEY] = id;
    ctx.set('X-Request-Id', id);
    let finished = false;
    res.once('finish', () => (finished = true));
    res.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const status: number = finished ? ctx.status : (ctx.state[FAILED_STATUS_KEY] ?? (wasCutByServer(socket) ? 503 : 499));
      const route = routeOf(ctx);
      const read = socket.bytesRead;
      const written = socket.bytesWritten;
      // One record per connection, updated in place.
      const before = accounted.get(socket);
      const bytesIn = read - (before?.read ?? 0);
      const bytesOut = written - (before?.written ?? 0);
      if (before) {
        before.read = read;
        before.written = written;
      } else accounted.set(socket, { read, written });
      const level = quiet.has(route) ? 'debug' : 'info';
      if (logger.isLevelEnabled(level)) {
        logger[level]({
          req_id: id,
          method: ctx.method,
          route,
          status,
          account_id: ctx.state.caller?.accountId,
          bytes_in: bytesIn,
          bytes_out: bytesOut,
          ms: Math.round(seconds * 1e4) / 10,
        }, 'request');
      }
      const labels = { route, method: ctx.method, status: String(status) };
      metrics?.requests.inc(labels);
      metrics?.requestDuration.observe(labels, seconds);
    });
    await next();
    // Error responses start from clean headers; put the id back.
    if (!ctx.headerSent) ctx.set('X-Request-Id', id);
  };
}
