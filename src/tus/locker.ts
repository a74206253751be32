// The lock on a resumable upload: which request may write to it now, after
// tus-node-server's Locker (packages/utils/src/models/Locker.ts): a lock is
// taken by lock() and ended only by its unlock(); committing what a request
// stored does not end it, and neither does a removal. The lock itself is a
// column pair in the database (records.ts: lock_token and
// locked_until), so two requests on any instances never both hold one.
//
// The newest request wins: a request that finds the upload locked asks the
// holder to let go (in this process directly, on other instances through
// `publish`, which server.ts carries over Redis pub/sub or PostgreSQL
// NOTIFY), and waits a bounded time for the lock to come free. The holder's
// signal aborts; it stops reading its body, commits what it stored and
// unlocks. A holder that died cannot answer: its lock ends when it is not
// renewed (locked_until passes). This is tus' lock(id, signal,
// requestRelease) and tusd's lock-release requests.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResumableRecords, ResumableRow } from './records.js';
import type { Clock } from '../clock.js';

export interface LockerOptions {
  /** How long a lock holds unless renewed (every third of it, while the holder runs). */
  leaseMs: number;
  /** How long a newcomer waits for the holder to let go before it gives up (409 upload_busy); 0 never asks. */
  takeoverMs: number;
  clock: Clock;
  /** Carries a release request to the other instances; absent on a single instance. */
  publish?: (id: string) => Promise<unknown> | void;
  /** Errors of work that must not fail the request (a release request that could not be sent, an unlock that failed). */
  onError: (err: unknown) => void;
}

/** A held lock: `signal` aborts when the holder must stop (a newer request asked, or the lock was lost). */
export interface UploadLock {
  /** The upload as it was when the lock was taken. */
  row: ResumableRow;
  /** Names this lock in the database: writes under it are conditional on it. */
  token: string;
  signal: AbortSignal;
  /** Ends the lock: the one way it ends. Safe to call more than once. */
  unlock(): Promise<void>;
}

/** What the locker knows of a lock held in this process. */
interface LocalLock {
  token: string;
  stop: (reason: Error) => void;
  unlocked: Promise<void>;
}

/** The reason a holder's signal aborts when a newer request takes its place. */
export class LockTakenOver extends Error {
  constructor() {
    super('a newer request for this upload took over');
  }
}

/** The reason a holder's signal aborts when its lock could not be renewed. */
export class LockLost extends Error {}

export class UploadLocker {
  /** Locks held by requests of this process, by upload id. */
  private readonly local = new Map<string, LocalLock>();

  constructor(
    private readonly records: ResumableRecords,
    readonly options: LockerOptions,
  ) {}

  private later(ms: number): Date {
    return new Date(this.options.clock().getTime() + ms);
  }

  /**
   * A release request for `id` reached this instance (from publish, or from
   * a request here): the holder, if it is here, is asked to stop.
   */
  requestRelease(id: string): void {
    this.local.get(id)?.stop(new LockTakenOver());
  }

  /**
   * Locks the account's upload `id` (at `offset` when given). If another
   * request holds it, asks that one to let go and waits for it, within the
   * takeover time. Undefined when the upload cannot be locked (not found,
   * other offset, or a holder that did not let go): the caller finds out
   * which. A lock returned must be unlocked, whatever happens next.
   */
  async lock(id: string, accountId: number, offset?: number): Promise<UploadLock | undefined> {
    const token = randomUUID();
    const take = () => this.records.lock(id, accountId, token, this.options.clock(), this.later(this.options.leaseMs), offset);
    // Uncontended: one UPDATE.
    let row = await take();
    if (!row && (await this.takeOver(id, accountId))) row = await take();
    return row ? this.hold(row, token) : undefined;
  }

  /**
   * Asks whoever holds `id`'s lock to let go and waits until no lock is
   * live. False when there was no live lock to begin with (the upload is
   * free, or gone) or the holder did not let go in time.
   */
  async takeOver(id: string, accountId: number): Promise<boolean> {
    const { takeoverMs, clock } = this.options;
    if (takeoverMs <= 0) return false;
    const deadline = Date.now() + takeoverMs;
    const here = this.local.get(id);
    if (here) {
      here.stop(new LockTakenOver());
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), takeoverMs)));
      const freed = await Promise.race([here.unlocked.then(() => true), timeout]);
      clearTimeout(timer);
      return freed;
    }
    const first = await this.records.lockedUntil(id, accountId);
    if (!first || first <= clock()) return false;
    // Another instance holds it, or a dead one whose lock runs out by itself.
    await Promise.resolve(this.options.publish?.(id)).catch(this.options.onError);
    for (let wait = 20; Date.now() < deadline; wait = Math.min(wait * 2, 200)) {
      await sleep(Math.min(wait, Math.max(0, deadline - Date.now())));
      const until = await this.records.lockedUntil(id, accountId);
      if (!until || until <= clock()) return true;
    }
    return false;
  }

  /** Registers the held lock and renews it until unlocked; aborts its signal when it must stop. */
  private hold(row: ResumableRow, token: string): UploadLock {
    const { records, local } = this;
    const controller = new AbortController();
    let markUnlocked!: () => void;
    const unlocked = new Promise<void>((resolve) => (markUnlocked = resolve));
    const stop = (reason: Error) => {
      if (!controller.signal.aborted) controller.abort(reason);
    };
    // A newer request on this instance for an upload locked here replaces
    // the entry only once this one unlocked (below).
    local.set(row.id, { token, stop, unlocked });
    // The lock outlives a stalled client only while this process is alive
    // to renew it; if it cannot, stop: what follows could not be saved.
    const renewal = setInterval(() => {
      records.renew(row.id, token, this.later(this.options.leaseMs)).then(
        (ours) => ours || stop(new LockLost('the lock ran out')),
        (err: unknown) => stop(err instanceof Error ? err : new LockLost(String(err))),
      );
    }, this.options.leaseMs / 3).unref();
    let ended = false;
    return {
      row,
      token,
      signal: controller.signal,
      unlock: async () => {
        if (ended) return;
        ended = true;
        clearInterval(renewal);
        try {
          // Only this token is released: a removal that took the row over
          // (its own claim) or a lock that ran out and was taken is left alone.
          await records.unlock(row.id, token).catch(this.options.onError);
        } finally {
          if (local.get(row.id)?.token === token) local.delete(row.id);
          markUnlocked();
        }
      },
    };
  }
}
