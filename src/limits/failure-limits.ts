import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';

export interface FailureLimitsOptions {
  /** Shared store; absent means per instance. */
  redis?: Redis;
  /** Prefix of the Redis keys. */
  keyPrefix?: string;
  /** What is counted, e.g. "auth": part of the store key. */
  name: string;
  /** Failures allowed per address in one window. */
  failures: number;
  /** Window length in seconds. */
  windowSeconds: number;
}

/**
 * Counts failures (bad API keys, unknown download tokens) per client address,
 * so secrets cannot be guessed at speed. Once an address reaches the limit,
 * it is refused until the window ends, whatever it sends.
 */
export class FailureLimits {
  private readonly limiter: RateLimiterAbstract;

  constructor(readonly options: FailureLimitsOptions) {
    const base = { keyPrefix: `${options.keyPrefix ?? 'dropstream'}:fail:${options.name}`, points: options.failures, duration: options.windowSeconds };
    const memory = new RateLimiterMemory(base);
    this.limiter = options.redis
      ? new RateLimiterRedis({ ...base, storeClient: options.redis, rejectIfRedisNotReady: true, insuranceLimiter: memory })
      : memory;
  }

  /** Seconds the address must wait, or 0 when it may try. */
  async waitSeconds(address: string): Promise<number> {
    const res = await this.limiter.get(address);
    if (!res || res.consumedPoints < this.options.failures) return 0;
    return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  }

  async record(address: string): Promise<void> {
    await this.limiter.penalty(address);
  }
}
