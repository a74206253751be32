import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore, OpenUpload } from '../storage/object-store.js';
import { utcDay, type UploadQuota } from './quota.js';
import type { ResumableUploads } from './resumable.js';

export interface SweepResult {
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
 * Removes what may be left in the store, in two passes.
 *
 * Records first: the pending_objects table names objects of deleted files
 * (removed at once) and uploads not touched for `grace` (crashed, or whose
 * abort could not reach the store). Each record is claimed by deleting it,
 * so concurrent sweeps on several instances, or an upload finishing at the
 * last moment, never act on the same one twice; if the store then fails,
 * the record is put back.
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
    private readonly quota: UploadQuota,
    private readonly resumable?: ResumableUploads,
  ) {}

  async sweep(graceSeconds: number): Promise<SweepResult> {
    const cutoff = new Date(Date.now() - graceSeconds * 1000);
    const result: SweepResult = { uploads: 0, deletes: 0, strays: 0, failed: 0 };
    await this.sweepRecords(cutoff, result);
    await this.sweepResumable(result);
    // A removal failed: the store is down, and listing it would only fail too.
    if (result.failed === 0) await this.sweepStrays(cutoff, result);
    return result;
  }

  private async sweepRecords(cutoff: Date, result: SweepResult): Promise<void> {
    const rows = await this.prisma.pendingObject.findMany({
      // Resumable uploads may be silent for long; they go when they expire (below).
      where: { OR: [{ reason: 'delete' }, { reason: { not: 'resumable' }, touchedAt: { lte: cutoff } }] },
      orderBy: { touchedAt: 'asc' },
      take: BATCH,
    });
    for (const row of rows) {
      const claimed = await this.prisma.pendingObject.deleteMany({
        where: { storageKey: row.storageKey, touchedAt: row.touchedAt },
      });
      if (claimed.count !== 1) continue; // completed, failed cleanly, or another sweep has it
      try {
        await this.store.discard(row.storageKey, row.uploadId ?? undefined);
      } catch {
        await this.prisma.pendingObject.create({ data: row });
        result.failed += 1;
        continue;
      }
      if (row.reason === 'delete') {
        result.deletes += 1;
        continue;
      }
      result.uploads += 1;
      if (row.accountId && row.quotaDay) await this.quota.release(row.accountId, utcDay(row.quotaDay));
    }
  }

  private async sweepStrays(cutoff: Date, result: SweepResult): Promise<void> {
    try {
      for await (const page of this.store.openUploads()) {
        const old = page.filter((upload) => upload.since <= cutoff);
        if (old.length === 0) continue;
        for (const upload of await this.unclaimed(old)) {
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

  /** The uploads no pending record claims: one query per page. */
  private async unclaimed(uploads: OpenUpload[]): Promise<OpenUpload[]> {
    const keys = uploads.flatMap((u) => (u.key === undefined ? [] : [u.key]));
    const claims = await this.prisma.pendingObject.findMany({
      where: { OR: [{ storageKey: { in: keys } }, { uploadId: { in: uploads.map((u) => u.uploadId) } }] },
      select: { storageKey: true, uploadId: true },
    });
    const claimedKeys = new Set(claims.map((c) => c.storageKey));
    const claimedIds = new Set(claims.map((c) => c.uploadId));
    return uploads.filter((u) => !claimedIds.has(u.uploadId) && (u.key === undefined || !claimedKeys.has(u.key)));
  }

  /** Resumable uploads past Upload-Expires with no request writing: bytes, records and slot of the unfinished; the row of the finished. */
  private async sweepResumable(result: SweepResult): Promise<void> {
    if (!this.resumable) return;
    const now = new Date();
    for (const id of await this.resumable.records.expired(now, BATCH)) {
      const outcome = await this.resumable.remove(id, { expiredAt: now });
      if (outcome === 'removed') result.uploads += 1;
      if (outcome === 'failed') result.failed += 1;
    }
  }
}
