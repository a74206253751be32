import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import { removeExpiredFiles } from './file-rows.js';
import { pruneAudit } from '../audit/retention.js';
import type { PendingRecord, UploadLedger } from '../ledger/ledger.js';
import { OrphanObjects, type OrphanCheck, type OrphanOptions } from './orphans.js';
import { systemClock, type Clock } from '../clock.js';

export interface SweepResult {
  /** Files past their expires_at, deleted (their objects go with the deletes of this sweep). */
  expired: number;
  /** Objects and incomplete uploads of uploads that never completed, removed. */
  uploads: number;
  /** Objects of deleted files, removed. */
  deletes: number;
  /** Open uploads in the store that no record claimed, older than the grace period, aborted. */
  strays: number;
  /** Objects older than the grace period that no file row or record names, removed (or, GC_ORPHAN_OBJECTS=report, found). */
  orphans: number;
  /** Removals that failed (store down); their records stay, and strays stay listed, for the next sweep. */
  failed: number;
}

/** Records handled per sweep, so one sweep never holds a huge result in memory. */
const BATCH = 500;

/**
 * How long a sweep holds its claim on a record while it removes the object:
 * far longer than a removal may take (two store calls, each within
 * STORE_CALL_TIMEOUT), so only a sweep that died leaves a claim to expire,
 * after which another sweep takes the record up.
 */
const CLAIM_SECONDS = 600;

/** The points of a sweep between two of its writes (tests interrupt it there, as a crash would). */
export type SweepStep = 'claimed' | 'discarded' | 'forgotten';

/** The tus uploads' own sweep (src/tus/uploads.ts), and the direct ones' (src/direct/uploads.ts): expired uploads, as their removal does them. */
export interface ExpiringUploads {
  sweepExpired(limit: number): Promise<{ removed: number; failed: number }>;
}

/** Several transports' expired uploads (tus, direct) as one sweep step, each in turn. */
export function allExpiring(...parts: ExpiringUploads[]): ExpiringUploads {
  return {
    async sweepExpired(limit) {
      const total = { removed: 0, failed: 0 };
      for (const part of parts) {
        const { removed, failed } = await part.sweepExpired(limit);
        total.removed += removed;
        total.failed += failed;
      }
      return total;
    },
  };
}

export interface SweeperOptions {
  claimSeconds?: number;
  /** AUDIT_RETENTION_DAYS: audit rows older than this many days are removed by each sweep; absent: none are. */
  auditRetentionDays?: number;
  /** Awaited at each step; a rejection ends the sweep there, with nothing undone (as a crash would). */
  onStep?: (step: SweepStep, storageKey: string) => Promise<void>;
  clock?: Clock;
  /**
   * The back-off of an ended upload's clean-up: the wait after its first
   * failure (doubling with each one after) and the longest wait. The server
   * makes them half a sweep interval and four intervals.
   */
  retryMs?: { first: number; max: number };
  /** The walk over the store's objects (orphans.ts); absent: no walk. */
  orphans?: OrphanOptions;
}

/** The back-off when none is given: 30 s, doubling, at most 20 min. */
const RETRY_MS = { first: 30_000, max: 20 * 60_000 };

/** How a removal went: 'waiting' when it removed what the record names but a cut write may still land (the record stays until late_until). */
type Removal = { outcome: 'removed' | 'waiting' | 'skipped' } | { outcome: 'failed'; claim: Date };

/**
 * Removes what may be left in the store, in passes.
 *
 * Records first: the upload ledger's records name objects of deleted files
 * (removed at once) and uploads not touched for `grace` (crashed, or whose
 * abort could not reach the store). Each record is claimed with a lease
 * (claimed_until), so concurrent sweeps on several instances, or an upload
 * finishing at the last moment (commitFile respects the claim), never act on
 * the same one twice; the record is removed only after the store confirmed
 * the removal, so a sweep that dies at any point leaves the record, and the
 * next sweep (once the claim expired) finishes the work. If the store fails,
 * the claim is let go at once.
 *
 * Uploads known to have ended (ledger.endUpload: they failed, and their
 * clean-up failed too or a write of theirs was cut) wait for no grace
 * period: their records, which hold no slot, place or reservation any more,
 * are retried from their retry_at. A failure moves a record's next try back
 * (doubling) and ends the pass, so a store that does not answer costs a
 * sweep one call; once a retry succeeds (the store answers again), the pass
 * goes on to every ended record backing off. A record of a cut write stays
 * after its removal until late_until, when the store can no longer apply
 * that write, and is removed once more then.
 *
 * Then the store's own list of open uploads, like tus' deleteExpired: those
 * older than `grace` that no record claims (by storage key or upload id) are
 * aborted. That catches what no record knows of: a crash between the store
 * creating a multipart upload and our recording its id. Uploads in progress
 * always have a record, so they are never touched. Resumable uploads (tus)
 * keep theirs (reason "resumable", with the store's upload id: the multipart
 * upload, or the local temp file's name) until they finish or expire, however
 * long they are silent; expired ones go in the pass between the two.
 *
 * Last, a page of the store's objects (orphans.ts): those older than
 * `grace` that no file row or record names are removed and reported.
 */
export class Sweeper {
  private readonly clock: Clock;
  private readonly orphans: OrphanObjects | undefined;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly store: ObjectStore,
    private readonly ledger: UploadLedger,
    private readonly resumable?: ExpiringUploads,
    private readonly options: SweeperOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.orphans = options.orphans && new OrphanObjects(prisma, store, options.orphans);
  }

  async sweep(graceSeconds: number): Promise<SweepResult> {
    const cutoff = new Date(this.clock().getTime() - graceSeconds * 1000);
    const result: SweepResult = { expired: 0, uploads: 0, deletes: 0, strays: 0, orphans: 0, failed: 0 };
    // Expired files first: their objects are queued as deletes, which the records pass removes at once.
    result.expired = await removeExpiredFiles(this.prisma, this.clock(), BATCH);
    const days = this.options.auditRetentionDays;
    if (days !== undefined) await pruneAudit(this.prisma, new Date(this.clock().getTime() - days * 86_400_000));
    await this.sweepRecords(cutoff, result);
    await this.sweepEnded(result);
    await this.sweepResumable(result);
    // A removal failed: the store is down, and listing it would only fail too.
    if (result.failed === 0) await this.sweepStrays(cutoff, result);
    if (result.failed === 0) await this.sweepOrphans(cutoff, result);
    return result;
  }

  /** `dropstream gc --check`: the orphans the walk would remove now, over the whole store, nothing removed. */
  async check(graceSeconds: number): Promise<OrphanCheck> {
    const orphans = this.orphans ?? new OrphanObjects(this.prisma, this.store, { mode: 'report', perSweep: 0 });
    return orphans.check(new Date(this.clock().getTime() - graceSeconds * 1000));
  }

  private async sweepRecords(cutoff: Date, result: SweepResult): Promise<void> {
    const rows = await this.ledger.dueForSweep(cutoff, BATCH);
    for (const row of rows) {
      const removal = await this.remove(row);
      if (removal.outcome === 'failed') {
        await this.ledger.letGo(row.storageKey, removal.claim);
        result.failed += 1;
      } else if (removal.outcome === 'removed') {
        if (row.reason === 'delete') result.deletes += 1;
        else result.uploads += 1;
      }
    }
  }

  /**
   * Ended uploads' clean-ups owed (see the class comment): the due ones,
   * and, once the store answered one, those backing off after failures too
   * (not those waiting out a late-write window: they were removed once).
   */
  private async sweepEnded(result: SweepResult): Promise<void> {
    const now = this.clock();
    const rows = await this.ledger.endedForSweep(BATCH);
    let answered = false;
    for (const row of rows) {
      const due = row.retryAt === null || row.retryAt <= now;
      if (!due && !(answered && row.attempts > 0)) continue;
      const removal = await this.remove(row);
      if (removal.outcome === 'failed') {
        await this.ledger.retryLater(row.storageKey, removal.claim, new Date(this.clock().getTime() + this.backOff(row.attempts + 1)));
        result.failed += 1;
        break;
      }
      if (removal.outcome === 'skipped') continue;
      // Removed, or removed with the record kept until a cut write can no longer land: counted either way.
      answered = true;
      result.uploads += 1;
    }
  }

  /** The wait after an ended upload's `failures`-th failed clean-up. */
  private backOff(failures: number): number {
    const { first, max } = this.options.retryMs ?? RETRY_MS;
    return Math.min(first * 2 ** Math.min(failures - 1, 30), max);
  }

  /**
   * Claims `row`, removes what it names from the store, then forgets it with
   * the slot and the reservation it still held (one statement), or, while a
   * cut write of it may still land, keeps it until then ('waiting'). Skipped
   * when it completed, failed cleanly, or another sweep has it.
   */
  private async remove(row: PendingRecord): Promise<Removal> {
    const step = this.options.onStep ?? (async () => {});
    const now = this.clock();
    const claim = new Date(now.getTime() + (this.options.claimSeconds ?? CLAIM_SECONDS) * 1000);
    if (!(await this.ledger.claim(row, now, claim))) return { outcome: 'skipped' };
    await step('claimed', row.storageKey);
    try {
      await this.store.discard(row.storageKey, row.uploadId ?? undefined);
    } catch {
      return { outcome: 'failed', claim };
    }
    await step('discarded', row.storageKey);
    if (row.lateUntil && row.lateUntil > now) {
      await this.ledger.awaitLateWrite(row, claim);
      return { outcome: 'waiting' };
    }
    await this.ledger.forgetSwept(row, claim);
    await step('forgotten', row.storageKey);
    return { outcome: 'removed' };
  }

  private async sweepOrphans(cutoff: Date, result: SweepResult): Promise<void> {
    if (!this.orphans) return;
    try {
      const swept = await this.orphans.sweep(cutoff);
      result.orphans += swept.orphans;
      result.failed += swept.failed;
    } catch {
      // Listing failed (store down): the next sweep lists again.
      result.failed += 1;
    }
  }

  private async sweepStrays(cutoff: Date, result: SweepResult): Promise<void> {
    try {
      for await (const page of this.store.openUploads()) {
        const old = page.filter((upload) => upload.since <= cutoff);
        if (old.length === 0) continue;
        for (const upload of await this.ledger.unclaimed(old)) {
          const aborted = await this.store.abortUpload(upload).then(
            () => true,
            () => false,
          );
          if (aborted) result.strays += 1;
          else result.failed += 1;
        }
      }
    } catch {
      // Listing failed (store down): the next sweep lists again.
      result.failed += 1;
    }
  }

  /** Resumable uploads past Upload-Expires with no request writing: bytes, records and slot of the unfinished; the row of the finished. */
  private async sweepResumable(result: SweepResult): Promise<void> {
    if (!this.resumable) return;
    const swept = await this.resumable.sweepExpired(BATCH);
    result.uploads += swept.removed;
    result.failed += swept.failed;
  }
}
