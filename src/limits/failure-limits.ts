import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from './rate-limiter-classes.js';

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
  /**
   * Seconds a key is refused once a reservation takes it over the limit
   * (rate-limiter-flexible's blockDuration); absent: until the window ends.
   */
  lockSeconds?: number;
}

/** Addresses remembered as refused, at most; beyond that the oldest are forgotten (they are asked about again). */
const REMEMBERED = 10_000;

/**
 * Counts failures (bad API keys, unknown download tokens) per client address,
 * so secrets cannot be guessed at speed. Once an address passes the limit,
 * its guesses are refused until the window ends; a valid API key or plain
 * link from it still passes (issue 27: one guesser behind a NAT must not
 * lock out everyone else there; those are 192 and 128 random bits), so only
 * their failures are checked against it, and a request with a good key or
 * link costs no trip here at all. Secrets a person chooses or types (link
 * passwords, the admin token) are reserved before they are checked
 * (reserve/refund) and refused, right or wrong, over the limit (issue 38).
 * The same class counts per link (wrong passwords from all addresses),
 * with a lock of its own length (lockSeconds).
 *
 * Counting is rate-limiter-flexible's (Redis, with an in-memory insurance
 * limiter while Redis is away). Refused addresses are remembered on this
 * instance until their window ends, so refusing their guesses again costs
 * no round trip.
 */
export class FailureLimits {
  private readonly limiter: RateLimiterAbstract;
  private readonly memory: RateLimiterMemory;
  /** Address -> time (ms) its refusal ends. */
  private readonly refused = new Map<string, number>();

  constructor(readonly options: FailureLimitsOptions) {
    const base = {
      keyPrefix: `${options.keyPrefix ?? 'dropstream'}:fail:${options.name}`,
      points: options.failures,
      duration: options.windowSeconds,
      blockDuration: options.lockSeconds ?? 0,
    };
    this.memory = new RateLimiterMemory(base);
    this.limiter = options.redis
      ? new RateLimiterRedis({ ...base, storeClient: options.redis, rejectIfRedisNotReady: true, insuranceLimiter: this.memory })
      : this.memory;
  }

  /** Seconds the address must wait, or 0 when it may try (one round trip unless it is known to be refused). */
  async waitSeconds(address: string): Promise<number> {
    return this.knownWaitSeconds(address) || this.waitFrom(this.limiter, address);
  }

  /**
   * Counts a failure and says, in the same round trip, whether the address
   * is now over the limit: seconds to wait, or 0 when this failure is still
   * within it (answer it as the failure it is).
   */
  async fail(address: string): Promise<number> {
    const res = await this.limiter.penalty(address);
    return res.consumedPoints > this.options.failures ? this.remember(address, res.msBeforeNext) : 0;
  }

  /**
   * Counts a try before it is checked (issue 38: counted after, 250
   * concurrent guesses all passed a read of the count made before any of
   * them failed), and says in the same round trip whether the key is over
   * the limit: seconds to wait (the try must not be checked), or 0 when it
   * may go on. A try that proves right, or is never checked, is given back
   * with refund().
   */
  async reserve(key: string): Promise<number> {
    const known = this.knownWaitSeconds(key);
    if (known > 0) return known;
    try {
      await this.limiter.consume(key);
      return 0;
    } catch (res) {
      // Over the limit the library rejects with its result, not an Error.
      if (res instanceof RateLimiterRes) return this.remember(key, res.msBeforeNext);
      throw res;
    }
  }

  /** Gives back a reserve() of a try that was right or never checked. */
  async refund(key: string): Promise<void> {
    await this.limiter.reward(key);
  }

  /** Seconds left of a refusal this instance has seen, without asking the store; 0 when none. */
  knownWaitSeconds(address: string): number {
    const until = this.refused.get(address);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left > 0) return Math.ceil(left / 1000);
    this.refused.delete(address);
    return 0;
  }

  private async waitFrom(limiter: RateLimiterAbstract, address: string): Promise<number> {
    const res = await limiter.get(address);
    if (!res || res.consumedPoints < this.options.failures) return 0;
    return this.remember(address, res.msBeforeNext);
  }

  private remember(address: string, msLeft: number): number {
    const ms = msLeft > 0 ? msLeft : this.options.windowSeconds * 1000;
    if (this.refused.size >= REMEMBERED) {
      const now = Date.now();
      for (const [a, until] of this.refused) if (until <= now || this.refused.size >= REMEMBERED) this.refused.delete(a);
    }
    this.refused.set(address, Date.now() + ms);
    return Math.max(1, Math.ceil(ms / 1000));
  }
}
