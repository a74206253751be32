// Every /api/v1 route declares the scope it needs next to its definition:
// `router.get('/files', need('files:read'), ...)`. need(scope) is the API
// guard (auth.ts) followed by the scope check, and carries the scope, so
// test/keys/key-scopes.test.ts can walk the router and fail on a route
// without one. The few routes no key reaches (a 405 before the key is
// checked) say so with unscoped(why).
import type { Middleware } from 'koa';
import { accountErrors } from '../accounts/errors.js';
import { holds, type Scope } from '../accounts/scopes.js';
import type { AuthState } from './auth.js';

/** The property need() and unscoped() mark their middleware with. */
export const DECLARED_SCOPE = Symbol('declared scope');

export type ScopedMiddleware = Middleware<AuthState> & { [DECLARED_SCOPE]: Scope | { unscoped: string } };

/** The guard of a route that needs `scope`. */
export type Need = (scope: Scope) => ScopedMiddleware;

/**
 * Builds need() over the API guard: the key is checked (and counted) by the
 * guard first, then its scope; a missing scope is 403 insufficient_scope,
 * which gives the request's rate-limit points back, as every 403 does.
 */
export function scopedGuard(guard: Middleware<AuthState>): Need {
  return (scope) => {
    const middleware: Middleware<AuthState> = (ctx, next) =>
      guard(ctx, async () => {
        const key = ctx.state.caller.key;
        if (!key || !holds(key, scope)) throw accountErrors.insufficientScope(scope);
        await next();
      });
    return Object.assign(middleware, { [DECLARED_SCOPE]: scope });
  };
}

/** A route that no key reaches, and why (the walk accepts it only with a reason). */
export function unscoped(why: string): ScopedMiddleware {
  const middleware: Middleware<AuthState> = (_ctx, next) => next();
  return Object.assign(middleware, { [DECLARED_SCOPE]: { unscoped: why } });
}

/** What a route declares: the scope it needs, or why no key reaches it. */
export type Declared = ScopedMiddleware[typeof DECLARED_SCOPE];

/** What each route of a router declares, by routeKey. */
export type RouteScopes = ReadonlyMap<string, Declared>;

/**
 * A route's key: its method and path, every parameter (`:id`, `{file_id}`)
 * as `{}` and no trailing slash, so that a router's path and the OpenAPI
 * document's name the same route alike.
 */
export const routeKey = (method: string, path: string) =>
  `${method.toUpperCase()} ${path.replace(/:[A-Za-z0-9_]+|\{[^}]+\}/g, '{}').replace(/(.)\/+$/, '$1')}`;

/** The part of a @koa/router layer this reads (its type is not exported). */
interface RouteLayer {
  methods: string[];
  path: string | RegExp;
  stack: unknown[];
}

/**
 * Every route of `router` and what it declares (need() or unscoped()), by
 * routeKey of its path without `prefix`. Where two routes answer the same
 * method and path, the first registered is the one that answers.
 * src/openapi/ documents each operation's scope from this
 * (test/contract/openapi.test.ts).
 */
export function declaredScopes(router: { stack: RouteLayer[] }, prefix = ''): RouteScopes {
  const scopes = new Map<string, Declared>();
  for (const layer of router.stack) {
    const declared = layer.stack.find((fn): fn is ScopedMiddleware => typeof fn === 'function' && DECLARED_SCOPE in fn);
    if (!declared || typeof layer.path !== 'string' || !layer.path.startsWith(prefix)) continue;
    for (const method of layer.methods) {
      const key = routeKey(method, layer.path.slice(prefix.length) || '/');
      if (!scopes.has(key)) scopes.set(key, declared[DECLARED_SCOPE]);
    }
  }
  return scopes;
}
