import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { UploadQuota } from './quota.js';

export interface SweepResult {
  /** Objects and incomplete uploads of uploads that never completed, removed. */
  uploads: number;
  /** Objects of deleted files, removed. */
  deletes: number;
  /** Records whose removal failed (store down); they stay for the next sweep. */
  failed: number;
}

/** Records handled per sweep, so one sweep never holds a huge result in memory. */
const BATCH = 500;

/**
 * Removes what the pending_objects table says may be left in the store:
 * objects of deleted files (at once) and uploads not touched for `grace`
 * (crashed, or whose abort could not reach the store). Each record is
 * claimed by deleting it, so concurrent sweeps on several instances, or an
 * upload finishing at the last moment, never act on the same one twice; if
 * the store then fails, the record is put back.
 */
export class Sweeper {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly store: ObjectStore,
    private readonly quota: UploadQuota,
  ) {}

  async sweep(graceSeconds: number): Promise<SweepResult> {
    const cutoff = new Date(Date.now() - graceSeconds * 1000);
    const rows = await this.prisma.pendingObject.findMany({
      where: { OR: [{ reason: 'delete' }, { touchedAt: { lte: cutoff } }] },
      orderBy: { touchedAt: 'asc' },
      take: BATCH,
    });
    const result: SweepResult = { uploads: 0, deletes: 0, failed: 0 };
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
      if (row.accountId && row.quotaDay) await this.quota.release(row.accountId, row.quotaDay.toISOString().slice(0, 10));
    }
    return result;
  }
}
