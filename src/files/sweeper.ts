import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import { removeExpiredFiles } from './file-rows.js';
import type { UploadLedger } from '../ledger/ledger.js';

export interface SweepResult {
  /** Files past their expires_at, deleted (their objects go with the deletes of this sweep). */
  expired: number;
  /** Objects and incomplete uploads of uploads that never completed, removed. */
  uploads: number;
  /** Objects of deleted files, removed. */
  deletes: number;
  /** Open uploads in the store that no record claimed, older than the grace period, aborted. */
  strays: number;
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

/** The tus uploads' own sweep (src/tus/uploads.ts): expired uploads, as their removal does them. */
export interface ExpiringUploads {
  sweepExpired(limit: number): Promise<{ removed: number; failed: number }>;
}

export interface SweeperOptions {
  claimSeconds?: number;
  /** Awaited at each step; a rejection ends the sweep there, with nothing undone (as a crash would). */
  onStep?: (step: SweepStep, storageKey: string) => Promise<void>;
}

/**
 * Removes what may be left in the store, in two passes.
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
 * Then the store's own list of open uploads, like tus' deleteExpired: those
 * older than `grace` that no record claims (by storage key or upload id) are
 * aborted. That catches what no record knows of: a crash between the store
 * creating a multipart upload and our recording its id. Uploads in progress
 * always have a record, so they are never touched. Resumable uploads (tus)
 * keep theirs (reason "resumable", with the store's upload id: the multipart
 * upload, or the local temp file's name) until they finish or expire, however
 * long they are silent; expired ones go in the pass between the two.
 */
export class Sweeper {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly store: ObjectStore,
    private readonly ledger: UploadLedger,
    private readonly resumable?: ExpiringUploads,
    private readonly options: SweeperOptions = {},
  ) {}

  async sweep(graceSeconds: number): Promise<SweepResult> {
    const cutoff = new Date(Date.now() - graceSeconds * 1000);
    const result: SweepResult = { expired: 0, uploads: 0, deletes: 0, strays: 0, failed: 0 };
    // Expired files first: their objects are queued as deletes, which the records pass removes at once.
    result.expired = await removeExpiredFiles(this.prisma, new Date(), BATCH);
    await this.sweepRecords(cutoff, result);
    await this.sweepResumable(result);
    // A removal failed: the store is down, and listing it would only fail too.
    if (result.failed === 0) await this.sweepStrays(cutoff, result);
    return result;
  }

  private async sweepRecords(cutoff: Date, result: SweepResult): Promise<void> {
    const rows = await this.ledger.dueForSweep(cutoff, BATCH);
    const step = this.options.onStep ?? (async () => {});
    for (const row of rows) {
      const now = new Date();
      const claim = new Date(now.getTime() + (this.options.claimSeconds ?? CLAIM_SECONDS) * 1000);
      if (!(await this.ledger.claim(row, now, claim))) continue; // completed, failed cleanly, or another sweep has it
      await step('claimed', row.storageKey);
      try {
        await this.store.discard(row.storageKey, row.uploadId ?? undefined);
      } catch {
        await this.ledger.letGo(row.storageKey, claim);
        result.failed += 1;
        continue;
      }
      await step('discarded', row.storageKey);
      // The record goes with the slot and the reservation it still held (one statement).
      await this.ledger.forgetSwept(row, claim);
      await step('forgotten', row.storageKey);
      if (row.reason === 'delete') result.deletes += 1;
      else result.uploads += 1;
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
