import type { Middleware } from 'koa';
import { AppError } from '../errors.js';

/** Headers a request may carry once: the credential and the target host. */
const SINGLE = new Set(['authorization', 'host']);
const SINGLE_LENGTHS = new Set([...SINGLE].map((name) => name.length));

/**
 * 400 `repeated_header` for a request that carries `Authorization` or `Host`
 * twice. Node keeps the first `Authorization` and drops the rest, while a
 * proxy in front may act on the last one: the two would disagree on who is
 * calling, or on which site is meant (issue 27). Node's rawHeaders still
 * show every copy. The connection is closed after the answer, as for any
 * request the two sides may have read differently.
 */
export function singleHeaders(): Middleware {
  return async (ctx, next) => {
    const raw = ctx.req.rawHeaders;
    // Runs on every request: no allocation unless a name has the length of one of SINGLE's.
    let seen: Set<string> | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      if (!SINGLE_LENGTHS.has(raw[i]!.length)) continue;
      const name = raw[i]!.toLowerCase();
      if (!SINGLE.has(name)) continue;
      seen ??= new Set();
      if (seen.has(name)) {
        throw new AppError('repeated_header', `The ${raw[i]} header may appear only once`, { Connection: 'close' });
      }
      seen.add(name);
    }
    await next();
  };
}
