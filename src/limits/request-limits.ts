import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from './rate-limiter-classes.js';
import type { Plan } from '../accounts/types.js';
import { utcDay } from '../utc-day.js';
import { systemClock, type Clock } from '../clock.js';

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
  /** The limiters that counted the request and under which keys: a refund goes to them. */
  counted: { limiters: Limiters; account: string; dayKey: string };
}

const MINUTE = 60;
const DAY = 86_400;
/** The day counter carries the UTC date and outlives its day a little, so it expires on its own. */
const DAY_KEY_SECONDS = DAY + 3600;
/** The memory counters never refuse by themselves: decide() compares them with the plan. */
const UNCAPPED = 2 ** 31 - 1;
/** Distinct plan limits with limiters of their own, at most; beyond that they are made afresh. */
const PLAN_LIMITERS = 1000;

const secondsToUtcMidnight = (now: Date) => {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
};

/** The two windows' limiters of one plan's numbers (or of every plan, in memory). */
interface Limiters {
  minute: RateLimiterAbstract;
  day: RateLimiterAbstract;
}

/** A refusal is a result too: rate-limiter-flexible rejects with the counter's state. */
const counted = (attempt: Promise<RateLimiterRes>) =>
  attempt.catch((err: unknown) => {
    if (err instanceof RateLimiterRes) return err;
    throw err;
  });

export interface RequestLimitsOptions {
  /** Shared store; absent means in-memory limits (one instance, the embedded default). */
  redis?: Redis;
  /** Prefix of the Redis keys. */
  keyPrefix?: string;
  clock?: Clock;
}

/**
 * Per-account request limits: a fixed one-minute window from the first
 * request, and the UTC day (as for the daily upload quota).
 *
 * With Redis, rate-limiter-flexible's RateLimiterRedis counts and refuses,
 * one limiter per window and plan numbers (the key is the account's, so a
 * plan change applies at once and keeps what was used). The two counters
 * go out in the same tick, and the client pipelines them automatically
 * (enableAutoPipelining, src/limits/redis.ts): one write, one round trip.
 * When Redis is not ready, fails or is slow, the library's insurance
 * limiter counts in memory instead (per instance, so a cluster briefly
 * allows up to N times the limit). Without Redis, the memory limiters are
 * the limits.
 *
 * A request refused by the minute limit spends no daily point: it did no
 * work, so the day's point is given back (a second trip, on that refusal
 * only).
 */
export class RequestLimits {
  /** Uncapped memory counters: the limits without Redis, and the insurance of every Redis limiter. */
  private readonly memory: Limiters;
  private readonly redis?: Redis;
  private readonly prefix: string;
  private readonly clock: Clock;
  /** Redis limiters by plan numbers ("per minute/per day"). */
  private readonly byPlan = new Map<string, Limiters>();

  constructor(options: RequestLimitsOptions) {
    this.clock = options.clock ?? systemClock;
    this.prefix = options.keyPrefix ?? 'dropstream';
    this.redis = options.redis;
    this.memory = {
      minute: new RateLimiterMemory({ keyPrefix: `${this.prefix}:rl:minute`, points: UNCAPPED, duration: MINUTE }),
      day: new RateLimiterMemory({ keyPrefix: `${this.prefix}:rl:day`, points: UNCAPPED, duration: DAY_KEY_SECONDS }),
    };
  }

  /** Counts one request of the account and says whether it may proceed. */
  async take(accountId: number, plan: Plan): Promise<LimitDecision> {
    const now = this.clock();
    const account = String(accountId);
    const dayKey = `${accountId}:${utcDay(now)}`;
    const limiters = this.limitersFor(plan);
    const [minute, day] = await Promise.all([counted(limiters.minute.consume(account)), counted(limiters.day.consume(dayKey))]);
    let dayUsed = day.consumedPoints;
    if (minute.consumedPoints > plan.requestsPerMinute) {
      await limiters.day.reward(dayKey).catch(() => {});
      dayUsed -= 1;
    }
    return decide(plan, now, minute.consumedPoints, minute.msBeforeNext, dayUsed, { limiters, account, dayKey });
  }

  /** Gives back a request's points (for requests answered 403, which do not count), through the limiters that took them. */
  async refund({ counted: { limiters, account, dayKey } }: LimitDecision): Promise<void> {
    await Promise.all([limiters.minute.reward(account), limiters.day.reward(dayKey)]);
  }

  private limitersFor(plan: Plan): Limiters {
    if (!this.redis) return this.memory;
    const numbers = `${plan.requestsPerMinute}/${plan.requestsPerDay}`;
    let limiters = this.byPlan.get(numbers);
    if (!limiters) {
      if (this.byPlan.size >= PLAN_LIMITERS) this.byPlan.clear();
      const shared = { storeClient: this.redis, rejectIfRedisNotReady: true };
      limiters = {
        minute: new RateLimiterRedis({
          ...shared,
          keyPrefix: `${this.prefix}:rl:minute`,
          points: plan.requestsPerMinute,
          duration: MINUTE,
          insuranceLimiter: this.memory.minute,
        }),
        day: new RateLimiterRedis({
          ...shared,
          keyPrefix: `${this.prefix}:rl:day`,
          points: plan.requestsPerDay,
          duration: DAY_KEY_SECONDS,
          insuranceLimiter: this.memory.day,
        }),
      };
      this.byPlan.set(numbers, limiters);
    }
    return limiters;
  }
}

function decide(plan: Plan, now: Date, minuteUsed: number, minuteMsLeft: number, dayUsed: number, counted: LimitDecision['counted']): LimitDecision {
  const refusedBy = minuteUsed > plan.requestsPerMinute ? 'minute' : dayUsed > plan.requestsPerDay ? 'day' : undefined;
  return {
    allowed: !refusedBy,
    refusedBy,
    minute: {
      name: 'minute',
      limit: plan.requestsPerMinute,
      remaining: Math.max(0, plan.requestsPerMinute - minuteUsed),
      resetSeconds: Math.max(1, Math.ceil(minuteMsLeft / 1000)),
      windowSeconds: MINUTE,
    },
    day: {
      name: 'day',
      limit: plan.requestsPerDay,
      remaining: Math.max(0, plan.requestsPerDay - dayUsed),
      resetSeconds: secondsToUtcMidnight(now),
      windowSeconds: DAY,
    },
    counted,
  };
}
