// JSON request bodies (a webhook, a link, a file request, the admin API's),
// read within BODY_TIMEOUT. Issue 50: a valid key and a head announcing
// 16,000 bytes, then a byte every 10 s, held a connection for as long as the
// client liked (IDLE_TIMEOUT only sees total silence), and 97 of them took
// every connection of an instance under `ulimit -n 256`. A JSON body is a
// few kilobytes that a client has in hand when it sends the head: it either
// arrives within seconds or it is not coming. Uploads are bodies that may
// take hours; they have their minimum rate instead (body-rate.ts).
import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import { bodyHeldBack } from './body-rate.js';

/** Requests whose JSON body is being read now: the wait is their client's. */
const reading = new WeakSet<IncomingMessage>();

/**
 * Whether the client of `req` owes us its JSON body: we are reading it and
 * the rest has not come (the listener may close such a connection for a
 * newcomer, as it closes an idle one). A body we hold back is not owed.
 */
export const clientOwesBody = (req: IncomingMessage) => reading.has(req) && !req.complete && !bodyHeldBack(req);

/** 408 body_timeout; the answer closes the connection, since the rest of the body is not wanted. */
const bodyTimeout = (seconds: number) =>
  new AppError('body_timeout', `The request body did not arrive within ${seconds} seconds`, { Connection: 'close' });

export interface JsonBodyOptions {
  /** The largest body accepted, in the bytes package's notation ('16kb'). */
  limit: string;
  /** The error of a body that is not JSON (or too large). */
  invalid: () => AppError;
  /** BODY_TIMEOUT in milliseconds: from the moment reading starts to the body's last byte. */
  timeoutMs: number;
  /** Imports @koa/bodyparser (a test's stand-in may fail as an import can: EMFILE). */
  loadParser?: () => Promise<typeof import('@koa/bodyparser')>;
}

/**
 * Parses a JSON body into ctx.request.body (a body of another type, or
 * none, is `{}`, as @koa/bodyparser has it), or answers 408 body_timeout
 * when the body is not all here within `timeoutMs`. The routes after it run
 * only once the body is read: a timed-out request never reaches them, even
 * if its last byte comes while the 408 is on its way.
 */
export function jsonBody({ limit, invalid, timeoutMs, loadParser = () => import('@koa/bodyparser') }: JsonBodyOptions): Middleware {
  // Imported with the first JSON body, not at start (issue 54): with co-body,
  // qs and their helpers it is 2.4 MiB of V8 heap in a process that may
  // serve only downloads and uploads for hours.
  let parser: Promise<Middleware> | undefined;
  const parse: Middleware = async (ctx, next) => {
    // A failed import (out of descriptors) fails this request only: the next one imports again.
    parser ??= loadParser().then(
      ({ bodyParser }) =>
        bodyParser({
          enableTypes: ['json'],
          jsonLimit: limit,
          onError: () => {
            throw invalid();
          },
        }) as Middleware,
      (err: unknown) => {
        parser = undefined;
        throw err;
      },
    );
    return (await parser)(ctx, next);
  };
  return async (ctx, next) => {
    const { req } = ctx;
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    const stop = () => {
      clearTimeout(timer);
      reading.delete(req);
    };
    const expired = new Promise<never>((_, reject) => {
      const check = () => {
        // All here (parsing is a microtask away), or waiting on us: not the client's fault.
        if (req.complete || bodyHeldBack(req)) timer = setTimeout(check, 100);
        else {
          timedOut = true;
          stop();
          reject(bodyTimeout(Math.round(timeoutMs / 1000)));
        }
      };
      timer = setTimeout(check, timeoutMs);
    });
    // Settled or not, it is never left unobserved.
    expired.catch(() => {});
    reading.add(req);
    try {
      await Promise.race([
        parse(ctx, async () => {
          stop();
          if (!timedOut) await next();
        }),
        expired,
      ]);
    } finally {
      stop();
    }
  };
}
