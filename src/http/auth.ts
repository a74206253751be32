import type { Middleware } from 'koa';
import type { AccountService } from '../accounts/service.js';
import type { Caller } from '../accounts/types.js';
import { accountErrors } from '../accounts/errors.js';
import { allows } from '../accounts/cidr.js';
import { truncateAddress, type Actor } from '../audit/actor.js';
import { AppError } from '../errors.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { RequestLimits } from '../limits/request-limits.js';
import type { RequestsInFlight } from '../limits/requests-in-flight.js';
import type { Metrics } from '../metrics.js';
import { nextThen, setLimitHeaders, tooManyFailures } from './rate-limit.js';

export interface AuthState {
  caller: Caller;
}

const BEARER = /^Bearer[ \t]+([A-Za-z0-9._~+/=-]+)[ \t]*$/i;

export interface ApiGuardDeps {
  accounts: AccountService;
  requestLimits: RequestLimits;
  /** Failed authentications per client address. */
  authFailures: FailureLimits;
  /** Requests in progress per account on this instance (ACCOUNT_REQUESTS_IN_FLIGHT). */
  inFlight: RequestsInFlight;
  /** The uploads a plan allows at once (its concurrent_uploads, or the default): the in-flight cap makes room for them. */
  uploadsAllowed: (plan: Caller['plan']) => number;
  metrics?: Metrics;
  /** AUDIT_FULL_ADDRESSES: the audit keeps client addresses whole rather than their /24 or /48. */
  fullAddresses?: boolean;
}

/**
 * Everything an API request passes before its route: the address's failure
 * limit, `Authorization: Bearer <API key>` of an account whose plan includes
 * the API, and the plan's request limits, with their state in the response
 * headers. A request with a good key costs one Redis round trip for all of
 * it and usually no SQL (the key's caller is cached). Bad keys (401) count
 * as failures of the address, and over the limit its guesses get 429; a
 * valid key from it still passes (issue 27: one guesser behind a NAT must
 * not lock out the others there; keys are 192-bit random (accounts/keys.ts), so the limit is
 * about load and noise, not about making a guess likely). 401 and 403
 * responses do not count against the plan (a route's 403 gives its points back).
 * A request then counts as in progress for its account until its route is
 * done (issue 50: one key's slow bodies held every connection); one past the
 * cap is 429 before it costs a point of the plan's limits.
 */
export function apiGuard({ accounts, requestLimits, authFailures, inFlight, uploadsAllowed, metrics, fullAddresses = false }: ApiGuardDeps): Middleware<AuthState> {
  const refused = (seconds: number) => tooManyFailures(authFailures, seconds, metrics);
  /** A 401 counts as a failure of the address, and may be the one that puts it over. */
  const unauthorized = async (address: string, error: AppError) => {
    const known = authFailures.knownWaitSeconds(address);
    if (known > 0) return refused(known);
    const wait = await authFailures.fail(address).catch(() => 0);
    return wait > 0 ? refused(wait) : error;
  };

  return async (ctx, next) => {
    const header = ctx.get('Authorization');
    if (!header) throw await unauthorized(ctx.ip, accountErrors.missingKey());
    const key = BEARER.exec(header)?.[1];
    const caller = key ? await accounts.authenticate(key) : undefined;
    if (!caller) throw await unauthorized(ctx.ip, accountErrors.invalidKey());
    if (!caller.plan.apiAccess) throw accountErrors.planWithoutApi(caller.plan.name);
    const ranges = caller.key?.allowedCidrs ?? [];
    if (ranges.length > 0 && !allows(ranges, ctx.ip)) throw accountErrors.addressNotAllowed();

    let leave: () => void;
    try {
      leave = inFlight.enter(caller.accountId, uploadsAllowed(caller.plan));
    } catch (err) {
      metrics?.rateLimitRefusals.inc({ reason: 'in_flight' });
      throw err;
    }
    try {
      const decision = await requestLimits.take(caller.accountId, caller.plan);
      // This request's own: the cached caller, and who and where for the audit
      // trail (src/audit/actor.ts), made when a write first asks for it: reads,
      // the hot path, never parse the address.
      const key = caller.key!;
      let actor: Actor | undefined;
      const ip = ctx.ip;
      ctx.state.caller = {
        ...caller,
        get actor(): Actor {
          actor ??= { kind: 'key', keyId: key.id, keyPublicId: key.publicId, keyName: key.name, requestId: null, address: truncateAddress(ip, fullAddresses) };
          return actor;
        },
      };
      const window = setLimitHeaders(ctx, decision);
      if (!decision.allowed) {
        metrics?.rateLimitRefusals.inc({ reason: window.name });
        throw new AppError('rate_limited', `Rate limit of ${window.limit} requests per ${window.name} exceeded`, {
          'Retry-After': String(window.resetSeconds),
        });
      }
      await nextThen(ctx, next, async (status) => {
        if (status === 403) await requestLimits.refund(decision).catch(() => {});
      });
    } finally {
      leave();
    }
  };
}

/** The password of `Authorization: Basic` (any user name, as browsers and `curl -u :secret` send it); undefined without one. */
export function basicPassword(header: string | undefined): string | undefined {
  const match = /^Basic +([A-Za-z0-9+/]+=*) *$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? undefined : decoded.slice(colon + 1);
}
