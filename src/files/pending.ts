import type { PrismaClient } from '../generated/prisma/client.js';
import { utcDay, type UploadQuota } from './quota.js';

/** What the pending_objects table is for; see prisma/schema.prisma. */
export type PendingReason = 'upload' | 'delete';

/**
 * The record of objects that may exist without a file row. Whoever removes
 * an upload's record (the upload itself when it fails, or the sweeper after
 * a crash) gives its quota slot back: removing the record is the claim, so
 * the slot comes back exactly once.
 */
export class PendingObjects {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly quota: UploadQuota,
  ) {}

  /** Before the first byte of an upload is written. */
  async recordUpload(storageKey: string, accountId: number, quotaDay: string): Promise<void> {
    await this.prisma.pendingObject.create({
      data: { storageKey, reason: 'upload', accountId, quotaDay: new Date(`${quotaDay}T00:00:00Z`) },
    });
  }

  async setUploadId(storageKey: string, uploadId: string): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { uploadId, touchedAt: new Date() } });
  }

  /** Marks an upload as still alive, so the sweeper leaves it alone. */
  async touch(storageKey: string): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { touchedAt: new Date() } });
  }

  /**
   * A failed upload whose object and incomplete upload are both gone
   * (`objectGone`) drops its record; otherwise the record, with its upload
   * id, stays for the sweeper. Either way its slot comes back now, once.
   */
  async settleFailedUpload(storageKey: string, objectGone: boolean): Promise<void> {
    const row = await this.prisma.pendingObject.findUnique({ where: { storageKey } });
    if (!row?.accountId || !row.quotaDay) {
      if (objectGone) await this.prisma.pendingObject.deleteMany({ where: { storageKey } });
      return;
    }
    const claimed = objectGone
      ? await this.prisma.pendingObject.deleteMany({ where: { storageKey, accountId: row.accountId } })
      : await this.prisma.pendingObject.updateMany({
          where: { storageKey, accountId: row.accountId },
          data: { accountId: null, quotaDay: null },
        });
    if (claimed.count === 1) await this.quota.release(row.accountId, utcDay(row.quotaDay));
  }
}
