import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { isDatabaseUnavailable } from '../db/errors.js';
import type { ErrorCode } from '../error-codes.js';
import { AppError } from '../errors.js';
import { ObjectNotFoundError, ObjectStoreError } from '../storage/object-store.js';
import { recordFailure, requestIdOf, routeOf } from './request-log.js';
import { closeAfterAnswer } from './unread-body.js';

const KEEP_ON_ERROR = /^(x-request-id|x-ratelimit-|ratelimit|tus-)/i;

const internal = () => new AppError('internal_error', 'Internal server error');

/** Errors from dependencies become their client-facing form here, at the edge. */
function toAppError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  if (isDatabaseUnavailable(err)) {
    return new AppError('database_unavailable', 'The database is unavailable; try again shortly', { 'Retry-After': '5' });
  }
  if (err instanceof ObjectNotFoundError) return new AppError('file_not_found', 'File not found');
  if (err instanceof ObjectStoreError) {
    return new AppError('store_unavailable', 'The object store is unavailable; try again later', { 'Retry-After': '5' });
  }
  return undefined;
}

/** Refusals of an upload for load or pace, counted by reason in dropstream_upload_refusals_total. */
const UPLOAD_REFUSALS = new Set<ErrorCode>(['server_busy', 'too_many_uploads', 'upload_too_slow']);

/**
 * The one place errors become responses: `{ success: false, error: { code, message } }`.
 * Only AppError messages reach clients; anything else is logged and becomes
 * a bare 500, so no stack trace or database text leaks.
 */
export function errorResponses(logger: Logger, metrics?: Metrics): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined && ctx.status === 404) throw new AppError('not_found', 'No such route');
      if (ctx.body === undefined && ctx.status === 405) throw new AppError('method_not_allowed', 'Method not allowed', { Allow: String(ctx.response.get('Allow')) });
      // Methods no route knows (TRACE, PROPFIND, MKCOL, ...): the router sets 501 and no body.
      if (ctx.body === undefined && ctx.status === 501) throw new AppError('not_implemented', `The method ${ctx.method} is not supported`);
    } catch (err) {
      if (err instanceof ObjectStoreError) {
        metrics?.storeErrors.inc();
        logger.warn({ err }, 'object store failed');
      } else if (isDatabaseUnavailable(err)) {
        logger.warn({ err: (err as Error).message }, 'database unavailable');
      }
      const known = toAppError(err);
      if (!known) logger.error({ err }, 'unhandled error');
      const error = known ?? internal();
      if (UPLOAD_REFUSALS.has(error.code)) metrics?.uploadRefusals.inc({ reason: error.code });
      if (ctx.headerSent) return;
      // Headers meant for the success response (a download's disposition, say)
      // must not ride on the error; the request id and limit state stay.
      for (const name of ctx.res.getHeaderNames()) if (!KEEP_ON_ERROR.test(name)) ctx.res.removeHeader(name);
      ctx.status = error.status;
      ctx.set(error.headers);
      ctx.body = { success: false, error: { code: error.code, message: error.message } };
      if (!ctx.req.complete) closeAfterAnswer(ctx.req, ctx.res);
    }
  };
}

/** Error codes that mean the client's connection went away: routine, and already logged as 499. */
const CLIENT_GONE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE', 'ERR_STREAM_DESTROYED']);

const isClientGone = (err: unknown) => CLIENT_GONE.has((err as NodeJS.ErrnoException | undefined)?.code ?? '');

/**
 * Koa's error channel (`app.on('error')`): failures after the response has
 * started, where errorResponses can no longer answer; chiefly a download
 * whose store stream breaks mid-way. Each is logged once with the request
 * id, store failures are counted, and the request's log line shows the
 * failure's status instead of 499. A client leaving is not an error here.
 */
export function lateErrors(logger: Logger, metrics?: Metrics) {
  // Koa reports such an error twice: from its body pipeline and, as the
  // pipeline destroys the socket with it, from on-finished.
  const reported = new WeakSet<object>();
  return (err: unknown, ctx?: Context) => {
    if (isClientGone(err) || (err instanceof Object && reported.has(err))) return;
    if (err instanceof Object) reported.add(err);
    const known = toAppError(err);
    if (err instanceof ObjectStoreError) metrics?.storeErrors.inc();
    if (ctx) recordFailure(ctx, known?.status ?? 500);
    const fields = { req_id: ctx && requestIdOf(ctx), route: ctx && routeOf(ctx), err };
    if (known) logger.warn(fields, 'response cut: it failed after its headers were sent');
    else logger.error(fields, 'unhandled error after the headers were sent');
  };
}
