import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * One log line per request. It names the route pattern, never the URL: a
 * download URL carries its link token, and tokens stay out of logs.
 */
export function requestLog(logger: Logger): Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const given = ctx.get('X-Request-Id');
    const id = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.set('X-Request-Id', id);
    ctx.res.once('close', () => {
      logger.info({
        req_id: id,
        method: ctx.method,
        route: ctx._matchedRoute ?? null,
        status: ctx.res.writableFinished ? ctx.status : 499,
        account_id: ctx.state.caller?.accountId,
        bytes_in: ctx.req.socket.bytesRead,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
      });
    });
    await next();
    // Error responses start from clean headers; put the id back.
    if (!ctx.headerSent) ctx.set('X-Request-Id', id);
  };
}
