import type { Middleware } from 'koa';
import type { AccountService, Caller } from '../accounts/service.js';
import { accountErrors } from '../accounts/errors.js';

export interface AuthState {
  caller: Caller;
}

const BEARER = /^Bearer[ \t]+([A-Za-z0-9._~+/=-]+)[ \t]*$/i;

/** Requires `Authorization: Bearer <API key>` of an account whose plan includes the API. */
export function requireApiKey(accounts: AccountService): Middleware<AuthState> {
  return async (ctx, next) => {
    const header = ctx.get('Authorization');
    if (!header) throw accountErrors.missingKey();
    const key = BEARER.exec(header)?.[1];
    const caller = key ? await accounts.authenticate(key) : undefined;
    if (!caller) throw accountErrors.invalidKey();
    if (!caller.plan.apiAccess) throw accountErrors.planWithoutApi(caller.plan.name);
    ctx.state.caller = caller;
    await next();
  };
}
