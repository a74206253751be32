import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * One log line and one metrics sample per request. Both name the route
 * pattern, never the URL: a download URL carries its link token, and tokens
 * stay out of logs. Byte counts are what crossed this request's connection
 * (HTTP/1.1 serves one request at a time per connection).
 */
export function requestLog(logger: Logger, metrics?: Metrics): Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const socket = ctx.req.socket;
    const readBefore = socket.bytesRead;
    const writtenBefore = socket.bytesWritten;
    const given = ctx.get('X-Request-Id');
    const id = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.set('X-Request-Id', id);
    ctx.res.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // 499, as nginx logs it: the client left before the response was complete.
      const status = ctx.res.writableFinished ? ctx.status : 499;
      const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
      logger.info({
        req_id: id,
        method: ctx.method,
        route,
        status,
        account_id: ctx.state.caller?.accountId,
        bytes_in: socket.bytesRead - readBefore,
        bytes_out: socket.bytesWritten - writtenBefore,
        ms: Math.round(seconds * 1e4) / 10,
      }, 'request');
      const labels = { route, method: ctx.method, status: String(status) };
      metrics?.requests.inc(labels);
      metrics?.requestDuration.observe(labels, seconds);
    });
    await next();
    // Error responses start from clean headers; put the id back.
    if (!ctx.headerSent) ctx.set('X-Request-Id', id);
  };
}
