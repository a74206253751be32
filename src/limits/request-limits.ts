import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Plan } from '../accounts/plans.js';

/** One window's state after a request, for the response headers. */
export interface WindowState {
  name: 'minute' | 'day';
  /** Requests allowed in the window. */
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
  /** Length of the window in seconds. */
  windowSeconds: number;
}

export interface LimitDecision {
  allowed: boolean;
  /** The window that refused the request, when one did. */
  refusedBy?: 'minute' | 'day';
  minute: WindowState;
  day: WindowState;
}

const MINUTE = 60;
const DAY = 86_400;

const utcDay = (now: Date) => now.toISOString().slice(0, 10);
const secondsToUtcMidnight = (now: Date) => {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
};

export interface RequestLimitsOptions {
  /** Shared store; absent means in-memory limits (one instance, the embedded default). */
  redis?: Redis;
  /** Prefix of the Redis keys. */
  keyPrefix?: string;
  clock?: () => Date;
}

/**
 * Per-account request limits: a fixed one-minute window from the first
 * request, and the UTC day (as for the daily upload quota). Counters live in
 * Redis, so every instance counts against the same numbers; when Redis fails
 * or is slow, each limiter falls back to an in-memory twin with the same
 * limit (per instance, so a cluster briefly allows up to N times the limit).
 *
 * A request refused by the minute limit does not spend a daily point: it did
 * no work.
 */
export class RequestLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();
  private readonly clock: () => Date;

  constructor(private readonly options: RequestLimitsOptions = {}) {
    this.clock = options.clock ?? (() => new Date());
  }

  // Limiters differ only in their limit; counts are stored by key prefix, so
  // a plan change applies at once and keeps what was already used.
  private limiter(window: 'minute' | 'day', points: number): RateLimiterAbstract {
    const id = `${window}:${points}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      // The day key carries the date, so it expires on its own a little after the day ends.
      const base = { keyPrefix: `${this.options.keyPrefix ?? 'dropstream'}:rl:${window}`, points, duration: window === 'minute' ? MINUTE : DAY + 3600 };
      const memory = new RateLimiterMemory(base);
      limiter = this.options.redis
        ? new RateLimiterRedis({ ...base, storeClient: this.options.redis, rejectIfRedisNotReady: true, insuranceLimiter: memory })
        : memory;
      this.limiters.set(id, limiter);
    }
    return limiter;
  }

  private async consume(limiter: RateLimiterAbstract, key: string): Promise<{ allowed: boolean; res: RateLimiterRes }> {
    try {
      return { allowed: true, res: await limiter.consume(key) };
    } catch (err) {
      if (err instanceof RateLimiterRes) return { allowed: false, res: err };
      throw err;
    }
  }

  /** Counts one request of the account and says whether it may proceed. */
  async take(accountId: number, plan: Plan): Promise<LimitDecision> {
    const now = this.clock();
    const dayKey = `${accountId}:${utcDay(now)}`;
    const minuteLimiter = this.limiter('minute', plan.requestsPerMinute);
    const dayLimiter = this.limiter('day', plan.requestsPerDay);
    const perMinute = await this.consume(minuteLimiter, String(accountId));
    const minute: WindowState = {
      name: 'minute',
      limit: plan.requestsPerMinute,
      remaining: Math.max(0, plan.requestsPerMinute - perMinute.res.consumedPoints),
      resetSeconds: Math.max(1, Math.ceil(perMinute.res.msBeforeNext / 1000)),
      windowSeconds: MINUTE,
    };
    let dayUsed: number;
    let refusedBy: LimitDecision['refusedBy'] = perMinute.allowed ? undefined : 'minute';
    if (!refusedBy) {
      const perDay = await this.consume(dayLimiter, dayKey);
      if (!perDay.allowed) refusedBy = 'day';
      dayUsed = perDay.res.consumedPoints;
    } else {
      dayUsed = (await dayLimiter.get(dayKey))?.consumedPoints ?? 0;
    }
    const day: WindowState = {
      name: 'day',
      limit: plan.requestsPerDay,
      remaining: Math.max(0, plan.requestsPerDay - dayUsed),
      resetSeconds: secondsToUtcMidnight(now),
      windowSeconds: DAY,
    };
    return { allowed: !refusedBy, refusedBy, minute, day };
  }

  /** Gives back a request's points (for requests answered 403, which do not count). */
  async refund(accountId: number, plan: Plan): Promise<void> {
    const dayKey = `${accountId}:${utcDay(this.clock())}`;
    await Promise.all([
      this.limiter('minute', plan.requestsPerMinute).reward(String(accountId)),
      this.limiter('day', plan.requestsPerDay).reward(dayKey),
    ]);
  }
}
