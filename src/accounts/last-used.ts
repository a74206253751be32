import type { PrismaClient } from '../generated/prisma/client.js';

/** How often a key's last_used_at is written at most. */
export const LAST_USED_INTERVAL_MS = 60_000;

/** Keys remembered at most; past it, those written more than an interval ago are dropped. */
const MAX_REMEMBERED = 10_000;

/**
 * api_keys.last_used_at (GET /api/v1/keys), written at most once a minute
 * per key: this instance remembers when it last wrote each key and sends
 * nothing within the interval, and the UPDATE itself changes the row only
 * when the column is older than a minute, so other instances' writes count
 * too. The write is not awaited by the request that caused it (it is not one
 * of the request's statements: the hot path's SQL stays what it was, bar one
 * statement per key and minute), and a failed write is dropped: the next
 * minute's will do.
 */
export class LastUsed {
  private readonly written = new Map<number, number>();

  constructor(
    private readonly prisma: PrismaClient,
    private readonly clock: () => number = Date.now,
    private readonly intervalMs = LAST_USED_INTERVAL_MS,
  ) {}

  /** Called on every authenticated request with its key. */
  touch(keyId: number): void {
    const now = this.clock();
    const last = this.written.get(keyId);
    if (last !== undefined && now - last < this.intervalMs) return;
    if (this.written.size >= MAX_REMEMBERED) this.forgetOld(now);
    this.written.set(keyId, now);
    const seconds = this.intervalMs / 1000;
    this.prisma.$executeRaw`
      UPDATE api_keys SET last_used_at = now()
      WHERE id = ${keyId} AND (last_used_at IS NULL OR last_used_at < now() - ${seconds}::int * interval '1 second')`.catch(() => {});
  }

  private forgetOld(now: number): void {
    for (const [id, at] of this.written) if (now - at >= this.intervalMs) this.written.delete(id);
    // Still full (that many keys used within a minute): forget the oldest half; they may be written once more.
    if (this.written.size >= MAX_REMEMBERED) for (const id of [...this.written.keys()].slice(0, MAX_REMEMBERED / 2)) this.written.delete(id);
  }
}
