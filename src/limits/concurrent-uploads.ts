// Concurrency slots: how many uploads each account runs at once, across all
// instances (the plan's concurrent_uploads). Not the daily slots of the
// plan's daily_uploads (src/ledger/daily-uploads.ts), nor an instance's
// places (upload-gate.ts). With Redis, each running upload is a member of
// a sorted set per account whose score is its lease's expiry: this process
// renews the leases of its uploads while they run, so the slots of a process
// that died expire within LEASE_MS. Without Redis the count is per process.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { AppError } from '../errors.js';

/** How long a slot outlives the process holding it: the slots of a killed instance are free again after this. */
export const LEASE_MS = 10_000;
/** Seconds a refused upload is told to wait: uploads hold their slots for seconds to minutes. */
const RETRY_AFTER_SECONDS = 5;

/** 429 too_many_uploads: the account's own limit (its plan), unlike 503 server_busy, which is the instance's (upload-gate.ts). */
const tooManyUploads = (limit: number) =>
  new AppError('too_many_uploads', `The plan allows ${limit} uploads at once; wait for one to finish`, { 'Retry-After': String(RETRY_AFTER_SECONDS) });

// One round trip: drop expired leases, count, add ours if there is room.
// The time is Redis's, so instances with skewed clocks agree on expiry.
const TAKE = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

// Pushes the expiry of this process's leases (pairs of key, member) on; adds
// them back when they lapsed (a Redis outage longer than a lease), since their
// uploads still run. A lease released while this is on its way comes back for
// at most one lease period.
const RENEW = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + tonumber(ARGV[1]), ARGV[i + 1])
  redis.call('PEXPIRE', key, ARGV[1])
end
return 0`;

interface Held {
  key: string;
  member: string;
}

export interface ConcurrencySlotsOptions {
  redis?: Redis;
  /**
   * The cap of an account whose plan sets no concurrent_uploads
   * (ACCOUNT_UPLOAD_CONCURRENCY): null in a plan means this default, never
   * unlimited, so a plan nobody thought about cannot take every slot.
   */
  defaultLimit: number;
  keyPrefix: string;
  leaseMs?: number;
  /** Redis failed: the slot was counted in this process only (logged by the caller). */
  onRedisError?: (err: unknown) => void;
}

export class ConcurrencySlots {
  /** Slots counted in this process: all of them without Redis, and those taken while Redis failed. */
  private readonly local = new Map<number, number>();
  private readonly held = new Set<Held>();
  private readonly leaseMs: number;
  private readonly renewal?: NodeJS.Timeout;

  constructor(private readonly options: ConcurrencySlotsOptions) {
    this.leaseMs = options.leaseMs ?? LEASE_MS;
    if (options.redis) {
      options.redis.defineCommand('dropstreamTakeSlot', { numberOfKeys: 1, lua: TAKE });
      options.redis.defineCommand('dropstreamRenewSlots', { lua: RENEW });
      // One round trip per interval for every upload this process runs.
      this.renewal = setInterval(() => this.renew(), this.leaseMs / 3).unref();
    }
  }

  /** The account's cap under a plan's concurrent_uploads (null: the instance default). */
  limitOf(planLimit: number | null): number {
    return planLimit ?? this.options.defaultLimit;
  }

  /**
   * Takes one of the account's slots under its plan's `planLimit` (null: the
   * default) or throws 429 too_many_uploads. Call the returned function once
   * when the upload ends; calling it again does nothing.
   */
  async take(accountId: number, planLimit: number | null): Promise<() => void> {
    const limit = this.limitOf(planLimit);
    const { redis } = this.options;
    if (redis) {
      const held = { key: `${this.options.keyPrefix}:upload-slots:${accountId}`, member: randomUUID() };
      let taken: number | undefined;
      try {
        taken = await (redis as unknown as SlotCommands).dropstreamTakeSlot(held.key, limit, this.leaseMs, held.member);
      } catch (err) {
        this.options.onRedisError?.(err);
      }
      if (taken === 0) throw tooManyUploads(limit);
      if (taken === 1) {
        this.held.add(held);
        return once(() => {
          this.held.delete(held);
          // If this fails, the lease expires on its own.
          redis.zrem(held.key, held.member).catch((err: unknown) => this.options.onRedisError?.(err));
        });
      }
    }
    const running = this.local.get(accountId) ?? 0;
    if (running >= limit) throw tooManyUploads(limit);
    this.local.set(accountId, running + 1);
    return once(() => {
      const left = (this.local.get(accountId) ?? 1) - 1;
      if (left > 0) this.local.set(accountId, left);
      else this.local.delete(accountId);
    });
  }

  close(): void {
    clearInterval(this.renewal);
  }

  private renew(): void {
    const { redis } = this.options;
    if (!redis || this.held.size === 0) return;
    const held = [...this.held];
    (redis as unknown as SlotCommands)
      .dropstreamRenewSlots(held.length, ...held.map((h) => h.key), this.leaseMs, ...held.map((h) => h.member))
      .catch((err: unknown) => this.options.onRedisError?.(err));
  }
}

interface SlotCommands {
  dropstreamTakeSlot(key: string, limit: number, leaseMs: number, member: string): Promise<number>;
  dropstreamRenewSlots(...args: (string | number)[]): Promise<number>;
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

/**
 * An upload's two places: one of the instance's (UploadGate, 503 when full,
 * or when the account holds its share of it) and one of the account's (429
 * at the plan's concurrent_uploads, or the default). The gate
 * first: it costs no round trip, and an instance that is full is full for
 * every account.
 */
export async function enterUpload(
  gate: { enter(accountId: number): () => void },
  slots: ConcurrencySlots,
  caller: { accountId: number; plan: { concurrentUploads: number | null } },
): Promise<() => void> {
  const leave = gate.enter(caller.accountId);
  try {
    const release = await slots.take(caller.accountId, caller.plan.concurrentUploads);
    return once(() => {
      release();
      leave();
    });
  } catch (err) {
    leave();
    throw err;
  }
}
