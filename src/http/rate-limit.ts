import type { Context, Next } from 'koa';
import { AppError } from '../errors.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { LimitDecision, WindowState } from '../limits/request-limits.js';
import type { Metrics } from '../metrics.js';

/** 429 for an address over `limits` (bad keys, unknown links) for `seconds` more; counted in the metrics. */
export function tooManyFailures(limits: FailureLimits, seconds: number, metrics?: Metrics): AppError {
  metrics?.rateLimitRefusals.inc({ reason: `${limits.options.name}_failures` });
  return new AppError('too_many_failures', 'Too many failed requests from this address; try again later', { 'Retry-After': String(seconds) });
}

/** Runs the rest of the chain, then `after` with the status the response gets (a thrown AppError's, or 500). */
export async function nextThen(ctx: Context, next: Next, after: (status: number) => Promise<void>): Promise<void> {
  let status = 500;
  try {
    await next();
    status = ctx.status;
  } catch (err) {
    status = err instanceof AppError ? err.status : 500;
    throw err;
  } finally {
    await after(status);
  }
}

/** The window a client should watch: the one that refused, else the one closest to refusing. */
function binding({ refusedBy, minute, day }: LimitDecision): WindowState {
  if (refusedBy) return refusedBy === 'minute' ? minute : day;
  return day.remaining < minute.remaining ? day : minute;
}

/** RateLimit-Policy by the windows' limits: one string per plan's numbers, not one per request. */
const policies = new Map<string, string>();
const POLICIES_KEPT = 1000;

function policyOf({ minute, day }: LimitDecision): string {
  const key = `${minute.limit}/${minute.windowSeconds}/${day.limit}/${day.windowSeconds}`;
  let policy = policies.get(key);
  if (policy === undefined) {
    policy = [minute, day].map((w) => `"${w.name}";q=${w.limit};w=${w.windowSeconds}`).join(', ');
    if (policies.size >= POLICIES_KEPT) policies.clear();
    policies.set(key, policy);
  }
  return policy;
}

/** The limit-state headers every API response carries; returns the window they describe. */
export function setLimitHeaders(ctx: Context, decision: LimitDecision): WindowState {
  const window = binding(decision);
  const nowSeconds = Math.floor(Date.now() / 1000);
  ctx.set({
    'X-RateLimit-Limit': String(window.limit),
    'X-RateLimit-Remaining': String(window.remaining),
    'X-RateLimit-Reset': String(nowSeconds + window.resetSeconds),
    // IETF draft-ietf-httpapi-ratelimit-headers: the policies, then the binding window's state.
    'RateLimit-Policy': policyOf(decision),
    RateLimit: `"${window.name}";r=${window.remaining};t=${window.resetSeconds}`,
  });
  return window;
}
