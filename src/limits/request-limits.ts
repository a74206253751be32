import type { Redis } from 'ioredis';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type { Plan } from '../accounts/plans.js';
import type { FailureLimits } from './failure-limits.js';
import { redisReady } from './redis.js';

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
  /** Where the request was counted and under which keys: a refund goes to the same place. */
  counted: { store: 'redis' | 'memory'; accountId: number; dayKey: string };
}

/** The client's address is over its failure limit: refused before anything is counted. */
export interface FailureRefusal {
  failureWaitSeconds: number;
}

const MINUTE = 60;
const DAY = 86_400;
/** The day counter carries the UTC date and outlives its day a little, so it expires on its own. */
const DAY_KEY_SECONDS = DAY + 3600;
/** The memory counters never refuse by themselves: the plan's limit is compared here. */
const UNCAPPED = 2 ** 31 - 1;

const utcDay = (now: Date) => now.toISOString().slice(0, 10);
const secondsToUtcMidnight = (now: Date) => {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
};

/**
 * One round trip: the address's failure count (written by FailureLimits),
 * then the account's minute counter, then, unless the minute refused, the
 * day counter. Counters start with their window's expiry (SET NX EX, as
 * rate-limiter-flexible does), and a key that lost its expiry gets it back.
 *   KEYS: failures, minute, day   ARGV: failures allowed, per-minute limit, minute s, day s
 *   -> {0, failures ms left} when the address is refused, else {1, minute count, minute ms left, day count}
 */
const TAKE = `
local failures = tonumber(redis.call('get', KEYS[1]) or '0')
if failures >= tonumber(ARGV[1]) then
  return {0, redis.call('pttl', KEYS[1])}
end
local function count(key, seconds)
  redis.call('set', key, 0, 'EX', seconds, 'NX')
  local n = redis.call('incr', key)
  local ttl = redis.call('pttl', key)
  if ttl == -1 then
    redis.call('expire', key, seconds)
    ttl = 1000 * seconds
  end
  return n, ttl
end
local minute, minuteTtl = count(KEYS[2], ARGV[3])
local day
if minute > tonumber(ARGV[2]) then
  day = tonumber(redis.call('get', KEYS[3]) or '0')
else
  day = count(KEYS[3], ARGV[4])
end
return {1, minute, minuteTtl, day}`;

/** Gives one point back to each counter that still exists (a refund never creates a key without expiry). */
const REFUND = `
for _, key in ipairs(KEYS) do
  if redis.call('exists', key) == 1 then redis.call('decr', key) end
end
return 0`;

interface LimitCommands {
  dropstreamTake(failures: string, minute: string, day: string, allowed: number, perMinute: number, minuteSeconds: number, daySeconds: number): Promise<number[]>;
  dropstreamRefund(minute: string, day: string): Promise<number>;
}

export interface RequestLimitsOptions {
  /** Shared store; absent means in-memory limits (one instance, the embedded default). */
  redis?: Redis;
  /** Prefix of the Redis keys. */
  keyPrefix?: string;
  /** The failure limit of API keys per address, checked in the same round trip. */
  failures: FailureLimits;
  clock?: () => Date;
}

/**
 * Per-account request limits: a fixed one-minute window from the first
 * request, and the UTC day (as for the daily upload quota). Counters live in
 * Redis, so every instance counts against the same numbers, and a request
 * costs one round trip for everything: the failure check of its address and
 * both counters (a Lua script; rate-limiter-flexible would take one trip per
 * limiter). When Redis is not connected or the script fails or is slow, the
 * request is counted in memory instead (rate-limiter-flexible's memory
 * limiter, per instance, so a cluster briefly allows up to N times the limit).
 *
 * A request refused by the minute limit does not spend a daily point: it did
 * no work. The plan's numbers are compared on every request, so a plan
 * change applies at once and keeps what was used.
 */
export class RequestLimits {
  private readonly minute: RateLimiterMemory;
  private readonly day: RateLimiterMemory;
  private readonly redis?: Redis & LimitCommands;
  private readonly prefix: string;
  private readonly failures: FailureLimits;
  private readonly clock: () => Date;

  constructor(options: RequestLimitsOptions) {
    this.clock = options.clock ?? (() => new Date());
    this.prefix = options.keyPrefix ?? 'dropstream';
    this.failures = options.failures;
    this.minute = new RateLimiterMemory({ keyPrefix: `${this.prefix}:rl:minute`, points: UNCAPPED, duration: MINUTE });
    this.day = new RateLimiterMemory({ keyPrefix: `${this.prefix}:rl:day`, points: UNCAPPED, duration: DAY_KEY_SECONDS });
    if (options.redis) {
      // EVALSHA, with EVAL once when Redis does not know the script yet.
      options.redis.defineCommand('dropstreamTake', { numberOfKeys: 3, lua: TAKE });
      options.redis.defineCommand('dropstreamRefund', { numberOfKeys: 2, lua: REFUND });
      this.redis = options.redis as Redis & LimitCommands;
    }
  }

  /**
   * Refuses `address` if it sent too many bad keys, otherwise counts one
   * request of the account and says whether it may proceed.
   */
  async take(accountId: number, plan: Plan, address: string): Promise<LimitDecision | FailureRefusal> {
    const now = this.clock();
    const dayKey = `${accountId}:${utcDay(now)}`;
    if (this.redis && redisReady(this.redis)) {
      const reply = await this.redis
        .dropstreamTake(
          this.failures.storeKey(address),
          this.minuteKey(accountId),
          `${this.prefix}:rl:day:${dayKey}`,
          this.failures.options.failures,
          plan.requestsPerMinute,
          MINUTE,
          DAY_KEY_SECONDS,
        )
        .catch(() => undefined);
      if (reply?.[0] === 0) return this.failures.refusedFor(address, reply[1]!);
      if (reply) return decide(plan, now, reply[1]!, reply[2]!, reply[3]!, { store: 'redis', accountId, dayKey });
    }
    const wait = await this.failures.waitSecondsInMemory(address);
    if (wait > 0) return { failureWaitSeconds: wait };
    const perMinute = await this.minute.consume(String(accountId));
    const dayUsed =
      perMinute.consumedPoints > plan.requestsPerMinute
        ? ((await this.day.get(dayKey))?.consumedPoints ?? 0)
        : (await this.day.consume(dayKey)).consumedPoints;
    return decide(plan, now, perMinute.consumedPoints, perMinute.msBeforeNext, dayUsed, { store: 'memory', accountId, dayKey });
  }

  /** Gives back a request's points (for requests answered 403, which do not count), where they were taken. */
  async refund({ counted }: LimitDecision): Promise<void> {
    if (counted.store === 'redis' && this.redis) {
      await this.redis.dropstreamRefund(this.minuteKey(counted.accountId), `${this.prefix}:rl:day:${counted.dayKey}`);
      return;
    }
    await Promise.all([this.minute.reward(String(counted.accountId)), this.day.reward(counted.dayKey)]);
  }

  private minuteKey(accountId: number): string {
    return `${this.prefix}:rl:minute:${accountId}`;
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
