import type { Logger } from 'pino';
import type { CallerCache } from './caller-cache.js';

/** What changed, as published to the other instances. */
type Change = { account: number } | { plan: string };

export interface Broadcast {
  /** The instances' notice channel for caller changes (server.ts: src/notices). */
  publish: (message: string) => Promise<unknown>;
  logger: Logger;
}

/**
 * Tells every instance's CallerCache that callers changed, once the change
 * is committed: this instance's at once, the others through the notice
 * carrier (src/notices: Redis pub/sub, else PostgreSQL NOTIFY; server.ts
 * hands each notice to applyCallerChange, below). If the publish fails
 * (Redis or PostgreSQL down), the others learn it when their entries expire
 * (the cache's TTL); the change itself stands and the request that made it
 * succeeds.
 */
export class CallerChanges {
  constructor(
    private readonly cache: CallerCache,
    private readonly broadcast?: Broadcast,
  ) {}

  /** After a key rotation or a change of the account's plan. */
  async accountChanged(accountId: number): Promise<void> {
    this.cache.forgetAccount(accountId);
    await this.publish({ account: accountId });
  }

  /** After a change to a plan's fields. */
  async planChanged(name: string): Promise<void> {
    this.cache.forgetPlan(name);
    await this.publish({ plan: name });
  }

  private async publish(change: Change): Promise<void> {
    if (!this.broadcast) return;
    const { publish, logger } = this.broadcast;
    await publish(JSON.stringify(change)).catch((err: Error) => {
      logger.warn({ err: err.message, change }, `could not tell other instances of a change: their cached keys expire within ${this.cache.options.ttlMs} ms`);
    });
  }
}

/** Applies a published change to this instance's cache; anything unreadable empties it. */
export function applyCallerChange(cache: CallerCache, message: string): void {
  try {
    const change = JSON.parse(message) as Partial<{ account: unknown; plan: unknown }>;
    if (typeof change.account === 'number') return cache.forgetAccount(change.account);
    if (typeof change.plan === 'string') return cache.forgetPlan(change.plan);
  } catch {}
  cache.clear();
}
