// The running SHA-256 of resumable uploads held in this instance's memory
// between requests (hash.ts explains why: Node's crypto cannot save its
// state in the row). The row names a held hash by a random token; only this
// instance holds it, and only the request that commits that row puts it
// here. A request never updates a held hash: it continues a copy, so a
// request that loses its lock (a newer one took over, the lease ran out)
// cannot touch what the newer one continues, and a PATCH whose bytes are
// not kept (a checksum mismatch, a store failure) leaves the held hash as
// the row still names it. Bounded in count and age: an entry that goes is
// an upload whose digest is read from the completed object once.
import type { Hash } from 'node:crypto';

export interface HeldHashesOptions {
  /** Uploads held at most; the least recently saved goes first. */
  maxEntries: number;
  /** How long an entry lives after it was saved: an upload not written for that long has expired (RESUMABLE_EXPIRY). */
  maxAgeMs: number;
  /** Milliseconds now (Date.now). */
  now?: () => number;
}

interface Held {
  token: string;
  /** Bytes the hash consumed: the upload's offset when it was saved. */
  bytes: number;
  hash: Hash;
  savedAt: number;
}

export class HeldHashes {
  /** By upload id, least recently saved first (save() re-inserts). */
  private readonly held = new Map<string, Held>();
  private readonly now: () => number;

  constructor(private readonly options: HeldHashesOptions) {
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    this.expire();
    return this.held.size;
  }

  /**
   * A copy of the hash upload `id` holds under `token`, if it consumed
   * exactly `bytes`; otherwise the entry (another request's, another
   * offset: not this row's any more) goes, and undefined.
   */
  copy(id: string, token: string, bytes: number): Hash | undefined {
    this.expire();
    const entry = this.held.get(id);
    if (entry?.token === token && entry.bytes === bytes) return entry.hash.copy();
    this.held.delete(id);
    return undefined;
  }

  /** Holds `hash` (of `bytes` bytes) for upload `id` under `token`, once the row naming it is saved; replaces what was held. */
  save(id: string, token: string, bytes: number, hash: Hash): void {
    this.held.delete(id);
    this.held.set(id, { token, bytes, hash, savedAt: this.now() });
    for (const oldest of this.held.keys()) {
      if (this.held.size <= this.options.maxEntries) break;
      this.held.delete(oldest);
    }
    this.expire();
  }

  /** Forgets upload `id` (completed, terminated, expired). */
  drop(id: string): void {
    this.held.delete(id);
  }

  /** Drops entries older than maxAgeMs (the oldest come first). */
  private expire(): void {
    const before = this.now() - this.options.maxAgeMs;
    for (const [id, entry] of this.held) {
      if (entry.savedAt > before) break;
      this.held.delete(id);
    }
  }
}
