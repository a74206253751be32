// The lease on a resumable upload: which request may write to it now. The
// lease itself is a column pair in the database (resumable-records.ts), so
// two requests on any instances never both hold one. The newest request
// wins: a request that finds the upload leased asks the holder to let go
// (in this process directly, on other instances through `publish`, which
// server.ts carries over Redis pub/sub or PostgreSQL NOTIFY), and waits a
// bounded time for the lease to come free. The holder stops reading its
// body, commits what it stored (an interrupted append does) and releases.
// A holder that died cannot answer: its lease ends when it is not renewed.
// This is the shape of tus-node-server's Locker (lock(id, signal,
// requestRelease)) and tusd's lock-release requests.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResumableRecords, ResumableRow } from './resumable-records.js';

export interface LeaseOptions {
  /** How long a lease holds unless renewed (every third of it, while the holder runs). */
  leaseMs: number;
  /** How long a newcomer waits for the holder to let go before it gives up (409 upload_busy); 0 never asks. */
  takeoverMs: number;
  clock: () => Date;
  /** Carries a release request to the other instances; absent on a single instance. */
  publish?: (id: string) => Promise<unknown> | void;
}

/** A held lease: `signal` aborts when the holder must stop (a newer request asked, or the lease was lost). */
export interface Lease {
  row: ResumableRow;
  token: string;
  signal: AbortSignal;
  /** Ends the lease (in the database unless `alreadyEnded`: a commit or removal ended it already). */
  release(alreadyEnded?: boolean): Promise<void>;
}

interface Holder {
  token: string;
  stop: (reason: Error) => void;
  released: Promise<void>;
}

/** The reason a holder's signal aborts when a newer request takes its place. */
export class LeaseTakenOver extends Error {
  constructor() {
    super('a newer request for this upload took over');
  }
}

/** The reason a holder's signal aborts when its lease could not be renewed. */
export class LeaseLost extends Error {}

export class UploadLeases {
  /** Leases held by requests of this process, by upload id. */
  private readonly holders = new Map<string, Holder>();

  constructor(
    private readonly records: ResumableRecords,
    private readonly options: LeaseOptions,
    private readonly onError: (err: unknown) => void,
  ) {}

  private later(ms: number): Date {
    return new Date(this.options.clock().getTime() + ms);
  }

  /**
   * A release request for `id` reached this instance (from publish, or from
   * a request here): the holder, if it is here, stops.
   */
  requestRelease(id: string): void {
    this.holders.get(id)?.stop(new LeaseTakenOver());
  }

  /**
   * Takes the lease of the account's upload `id` (at `offset` when given).
   * If another request holds it, asks that one to let go and waits for it,
   * within the takeover time. Undefined when the upload cannot be leased
   * (not found, other offset, or a holder that did not let go): the caller
   * finds out which.
   */
  async acquire(id: string, accountId: number, offset?: number): Promise<Lease | undefined> {
    const token = randomUUID();
    const take = () => this.records.lease(id, accountId, token, this.options.clock(), this.later(this.options.leaseMs), offset);
    // Uncontended: one UPDATE, as before there was any takeover.
    let row = await take();
    if (!row && (await this.takeOver(id, accountId))) row = await take();
    return row ? this.hold(row, token) : undefined;
  }

  /**
   * Asks whoever holds `id`'s lease to let go and waits until no lease is
   * live. False when there was no live lease to begin with (the upload is
   * free, or gone) or the holder did not let go in time.
   */
  async takeOver(id: string, accountId: number): Promise<boolean> {
    const { takeoverMs, clock } = this.options;
    if (takeoverMs <= 0) return false;
    const deadline = Date.now() + takeoverMs;
    const local = this.holders.get(id);
    if (local) {
      local.stop(new LeaseTakenOver());
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), takeoverMs)));
      const freed = await Promise.race([local.released.then(() => true), timeout]);
      clearTimeout(timer);
      return freed;
    }
    const first = await this.records.lockedUntil(id, accountId);
    if (!first || first <= clock()) return false;
    // Another instance holds it, or a dead one whose lease runs out by itself.
    await Promise.resolve(this.options.publish?.(id)).catch(this.onError);
    for (let wait = 20; Date.now() < deadline; wait = Math.min(wait * 2, 200)) {
      await sleep(Math.min(wait, Math.max(0, deadline - Date.now())));
      const until = await this.records.lockedUntil(id, accountId);
      if (!until || until <= clock()) return true;
    }
    return false;
  }

  /** Registers the held lease, renews it while held; aborts its signal when it must stop. */
  private hold(row: ResumableRow, token: string): Lease {
    const { records, holders } = this;
    const controller = new AbortController();
    let markReleased!: () => void;
    const released = new Promise<void>((resolve) => (markReleased = resolve));
    const stop = (reason: Error) => {
      if (!controller.signal.aborted) controller.abort(reason);
    };
    // A newer request on this instance for an upload leased here replaces
    // the entry only once this one let go (release below).
    holders.set(row.id, { token, stop, released });
    // The lease outlives a stalled client only while this process is alive
    // to renew it; if it cannot, stop: what follows could not be saved.
    const renewal = setInterval(() => {
      records.renew(row.id, token, this.later(this.options.leaseMs)).then(
        (ours) => ours || stop(new LeaseLost('the lease ran out')),
        (err: unknown) => stop(err instanceof Error ? err : new LeaseLost(String(err))),
      );
    }, this.options.leaseMs / 3).unref();
    let ended = false;
    return {
      row,
      token,
      signal: controller.signal,
      release: async (alreadyEnded = false) => {
        if (ended) return;
        ended = true;
        clearInterval(renewal);
        try {
          // Only this token is released: after a commit or a removal that
          // already ended the lease, this would change nothing.
          if (!alreadyEnded) await records.release(row.id, token).catch(this.onError);
        } finally {
          if (holders.get(row.id)?.token === token) holders.delete(row.id);
          markReleased();
        }
      },
    };
  }
}
