import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
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
/** The counters never refuse by themselves (see RequestLimits). */
const UNCAPPED = 2 ** 31 - 1;
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
 * or is slow, the counters fall back to in-memory twins (per instance, so a
 * cluster briefly allows up to N times the limit).
 *
 * A request refused by the minute limit does not spend a daily point: it did
 * no work.
 */
export class RequestLimits {
  private readonly minute: RateLimiterAbstract;
  private readonly day: RateLimiterAbstract;
  private readonly clock: () => Date;

  constructor(options: RequestLimitsOptions = {}) {
    this.clock = options.clock ?? (() => new Date());
    const prefix = options.keyPrefix ?? 'dropstream';
    // The store only counts; the plan's limit is compared here, on every
    // request, so a plan change applies at once and keeps what was used.
    const counter = (window: 'minute' | 'day', duration: number) => {
      const base = { keyPrefix: `${prefix}:rl:${window}`, points: UNCAPPED, duration };
      const memory = new RateLimiterMemory(base);
      return options.redis
        ? new RateLimiterRedis({ ...base, storeClient: options.redis, rejectIfRedisNotReady: true, insuranceLimiter: memory })
        : memory;
    };
    this.minute = counter('minute', MINUTE);
    // The day key carries the UTC date, so it expires on its own a little after the day ends.
    this.day = counter('day', DAY + 3600);
  }

  /** Counts one request of the account and says whether it may proceed. */
  async take(accountId: number, plan: Plan): Promise<LimitDecision> {
    const now = this.clock();
    const dayKey = `${accountId}:${utcDay(now)}`;
    const perMinute = await this.minute.consume(String(accountId));
    let refusedBy: LimitDecision['refusedBy'] = perMinute.consumedPoints > plan.requestsPerMinute ? 'minute' : undefined;
    let dayUsed: number;
    if (!refusedBy) {
      dayUsed = (await this.day.consume(dayKey)).consumedPoints;
      if (dayUsed > plan.requestsPerDay) refusedBy = 'day';
    } else {
      dayUsed = (await this.day.get(dayKey))?.consumedPoints ?? 0;
    }
    return {
      allowed: !refusedBy,
      refusedBy,
      minute: {
        name: 'minute',
        limit: plan.requestsPerMinute,
        remaining: Math.max(0, plan.requestsPerMinute - perMinute.consumedPoints),
        resetSeconds: Math.max(1, Math.ceil(perMinute.msBeforeNext / 1000)),
        windowSeconds: MINUTE,
      },
      day: {
        name: 'day',
        limit: plan.requestsPerDay,
        remaining: Math.max(0, plan.requestsPerDay - dayUsed),
        resetSeconds: secondsToUtcMidnight(now),
        windowSeconds: DAY,
      },
    };
  }

  /** Gives back a request's points (for requests answered 403, which do not count). */
  async refund(accountId: number): Promise<void> {
    const dayKey = `${accountId}:${utcDay(this.clock())}`;
    await Promise.all([this.minute.reward(String(accountId)), this.day.reward(dayKey)]);
  }
}
