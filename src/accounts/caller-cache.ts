import type { Caller } from './types.js';

export interface CallerCacheOptions {
  /** How long an entry is trusted without news of a change; bounds staleness when a change notice is lost. */
  ttlMs: number;
  /** Entries kept at most; the oldest go first. */
  maxEntries: number;
  clock?: () => number;
}

interface Entry {
  caller: Caller;
  expires: number;
}

/**
 * API key hash -> caller (account and plan), for a short time, so most
 * requests need no database lookup to authenticate. Changes that would make
 * an entry wrong (a key rotated, a plan or an account's plan changed) remove
 * the affected entries at once (see CallerChanges in caller-changes.ts),
 * here and, through Redis, on every instance.
 *
 * A lookup that started before such a removal must not store what it read:
 * it may have read the old state. Every removal bumps `generation`; a lookup
 * takes the generation before reading and set() ignores it if it moved.
 * Only valid keys are cached: a revoked or unknown key is looked up each time,
 * by the same single query (AccountService.authenticate), so neither is faster.
 */
export class CallerCache {
  private readonly entries = new Map<string, Entry>();
  private current = 0;
  private readonly clock: () => number;

  constructor(readonly options: CallerCacheOptions) {
    this.clock = options.clock ?? Date.now;
  }

  /** Pass to set(): the state of the cache when a lookup began. */
  get generation(): number {
    return this.current;
  }

  get(keyHash: string): Caller | undefined {
    const entry = this.entries.get(keyHash);
    if (!entry) return undefined;
    if (entry.expires > this.clock()) return entry.caller;
    this.entries.delete(keyHash);
    return undefined;
  }

  set(keyHash: string, caller: Caller, generation: number): void {
    if (generation !== this.current || this.options.ttlMs <= 0) return;
    this.entries.delete(keyHash);
    if (this.entries.size >= this.options.maxEntries) this.evict();
    this.entries.set(keyHash, { caller, expires: this.clock() + this.options.ttlMs });
  }

  forgetAccount(accountId: number): void {
    this.forget((caller) => caller.accountId === accountId);
  }

  forgetPlan(name: string): void {
    this.forget((caller) => caller.plan.name === name);
  }

  clear(): void {
    this.forget(() => true);
  }

  private forget(matches: (caller: Caller) => boolean): void {
    this.current += 1;
    for (const [hash, entry] of this.entries) if (matches(entry.caller)) this.entries.delete(hash);
  }

  /** Drops expired entries, then the oldest until there is room (a Map iterates in insertion order). */
  private evict(): void {
    const now = this.clock();
    for (const [hash, entry] of this.entries) if (entry.expires <= now) this.entries.delete(hash);
    for (const hash of this.entries.keys()) {
      if (this.entries.size < this.options.maxEntries) break;
      this.entries.delete(hash);
    }
  }
}
