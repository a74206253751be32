// The one owner of the pending_objects table (prisma/schema.prisma): every
// read and write of it is here, named for what it means. A record names an
// object that may exist without a file row: an upload in progress (reason
// "upload", or "resumable" for a tus upload) or the object of a deleted file
// (reason "delete"). An upload's record also holds its daily slot.
//
// Claims are conditional writes, safe across instances: removing a record
// (or nulling its account) is what entitles the remover to give its slot
// back, so the slot comes back exactly once; a sweep claims a record with a
// lease (claimed_until) before touching the store, and forgets it only once
// the store confirmed the removal.
//
// Writes that must share a caller's statement or transaction are offered in
// the form the caller needs: an SQL fragment for the single statements of
// file-rows.ts (a statement is atomic, and one round trip), a Prisma query
// for a batch $transaction([...]), or a method taking the transaction client.
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { OpenUpload } from '../storage/object-store.js';
import { dayDate, utcDay } from '../utc-day.js';
import type { UploadQuota } from './quota.js';

/** What the pending_objects table is for; see prisma/schema.prisma. */
export type PendingReason = 'upload' | 'resumable' | 'delete';

export type PendingRecord = Prisma.PendingObjectGetPayload<object>;

/** What holds a daily slot: the account and the UTC day it was taken on (null once given back). */
export type SlotHolder = Pick<PendingRecord, 'accountId' | 'quotaDay'>;

/** The client of an interactive transaction (prisma.$transaction(async (tx) => ...)). */
export type Transaction = Prisma.TransactionClient;

/**
 * Drops the record of `storageKey` for its file row, unless a sweep claims it
 * (judged abandoned): a CTE for commitFile's single statement, returning
 * storage_key when the claim succeeded.
 */
export const claimForFileSql = (storageKey: string, now: Date) => Prisma.sql`
  DELETE FROM pending_objects
  WHERE storage_key = ${storageKey} AND (claimed_until IS NULL OR claimed_until <= ${now}::timestamp(3))
  RETURNING storage_key, reserved_bytes`;

/**
 * Records the objects of the rows of `removed` (a CTE with a storage_key
 * column) for removal (reason "delete"): a CTE for removeFileRow's single
 * statement, so a file row never goes without its object being recorded.
 */
export const queueRemovalsSql = (removed: 'removed', now: Date) => Prisma.sql`
  INSERT INTO pending_objects (storage_key, reason, created_at, touched_at)
  SELECT storage_key, 'delete', ${now}::timestamp(3), ${now}::timestamp(3) FROM ${Prisma.raw(removed)}`;

export class PendingObjects {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly quota: UploadQuota,
  ) {}

  // Plain uploads (upload.ts).

  /** Before the first byte of an upload is written: the record holds the slot of `quotaDay`. */
  async recordUpload(storageKey: string, accountId: number, quotaDay: string): Promise<void> {
    await this.prisma.pendingObject.create({ data: { storageKey, reason: 'upload', accountId, quotaDay: dayDate(quotaDay) } });
  }

  /** The store's handle on the incomplete upload, once it has one (the sweep discards it). */
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
   * id, stays for the sweeper. Either way its slot comes back now, once:
   * removing the record, or nulling its account, is the claim on the slot.
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
    if (claimed.count === 1) await this.releaseSlot(row);
  }

  // Deleted files (service.ts; the record itself comes with the row's removal, queueRemovalsSql).

  /** After the store removed the object of a deleted file: nothing is left to remove. */
  async forgetRemoved(storageKey: string): Promise<void> {
    await this.prisma.pendingObject.deleteMany({ where: { storageKey } });
  }

  // Resumable uploads (resumable-records.ts): the record lives with the
  // upload's resumable_uploads row, written in the same transactions.

  /** The record of a new tus upload, holding the slot of `quotaDay`: a query for the batch transaction that creates its row. */
  recordResumable(upload: { storageKey: string; accountId: number; quotaDay: string; uploadId?: string }) {
    const { storageKey, accountId, quotaDay, uploadId } = upload;
    return this.prisma.pendingObject.create({ data: { storageKey, reason: 'resumable', accountId, quotaDay: dayDate(quotaDay), uploadId } });
  }

  /** The store's new handle on a tus upload: a query for the batch transaction that saves its state. */
  setResumableUploadId(storageKey: string, uploadId: string | undefined) {
    return this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { uploadId } });
  }

  /** Whether a tus upload's record still holds its slot (it is not a file yet). One lookup by key, so concurrent ones batch. */
  async holdsResumable(storageKey: string): Promise<boolean> {
    const row = await this.prisma.pendingObject.findUnique({ where: { storageKey }, select: { reason: true } });
    return row?.reason === 'resumable';
  }

  /** A tus upload's record, read inside the transaction claiming the upload for its removal. */
  async resumableRecord(tx: Transaction, storageKey: string): Promise<PendingRecord | undefined> {
    return (await tx.pendingObject.findUnique({ where: { storageKey, reason: 'resumable' } })) ?? undefined;
  }

  /** Drops a tus upload's record inside the transaction dropping its row; true when this removed it, and so holds its slot. */
  async forgetResumable(tx: Transaction, storageKey: string): Promise<boolean> {
    const { count } = await tx.pendingObject.deleteMany({ where: { storageKey, reason: 'resumable' } });
    return count === 1;
  }

  // The sweep (sweeper.ts).

  /** Records to sweep, oldest first: every deleted file's, and uploads untouched since `cutoff` (tus uploads go when they expire). */
  async dueForSweep(cutoff: Date, limit: number): Promise<PendingRecord[]> {
    return this.prisma.pendingObject.findMany({
      where: { OR: [{ reason: 'delete' }, { reason: { not: 'resumable' }, touchedAt: { lte: cutoff } }] },
      orderBy: { touchedAt: 'asc' },
      take: limit,
    });
  }

  /**
   * Claims `row` for a sweep until `until`, if it is unchanged since read
   * (not touched) and no live claim holds it. False when it completed,
   * failed cleanly, was touched, or another sweep has it.
   */
  async claim(row: PendingRecord, now: Date, until: Date): Promise<boolean> {
    const { count } = await this.prisma.pendingObject.updateMany({
      where: { storageKey: row.storageKey, touchedAt: row.touchedAt, OR: [{ claimedUntil: null }, { claimedUntil: { lte: now } }] },
      data: { claimedUntil: until },
    });
    return count === 1;
  }

  /** Restores a record whose removal failed (store down) to the next sweep: the claim `until` ends now. */
  async letGo(storageKey: string, until: Date): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey, claimedUntil: until }, data: { claimedUntil: null } });
  }

  /**
   * After the store removed what `row` names: the record goes, if the claim
   * `until` is still ours. True when it still held its slot (the caller gives
   * it back, once): an upload that settled meanwhile (settleFailedUpload)
   * took its slot back and nulled the account.
   */
  async forgetSwept(row: PendingRecord, until: Date): Promise<boolean> {
    const forgotten = await this.prisma.pendingObject.deleteMany({
      where: { storageKey: row.storageKey, claimedUntil: until, accountId: row.accountId, quotaDay: row.quotaDay },
    });
    if (forgotten.count === 0) await this.prisma.pendingObject.deleteMany({ where: { storageKey: row.storageKey, claimedUntil: until } });
    return forgotten.count === 1 && row.accountId !== null && row.quotaDay !== null;
  }

  /** The open uploads no record claims (by storage key or upload id): one query. */
  async unclaimed(uploads: OpenUpload[]): Promise<OpenUpload[]> {
    const keys = uploads.flatMap((u) => (u.key === undefined ? [] : [u.key]));
    const claims = await this.prisma.pendingObject.findMany({
      where: { OR: [{ storageKey: { in: keys } }, { uploadId: { in: uploads.map((u) => u.uploadId) } }] },
      select: { storageKey: true, uploadId: true },
    });
    const claimedKeys = new Set(claims.map((c) => c.storageKey));
    const claimedIds = new Set(claims.map((c) => c.uploadId));
    return uploads.filter((u) => !claimedIds.has(u.uploadId) && (u.key === undefined || !claimedKeys.has(u.key)));
  }

  // Slots.

  /**
   * Gives back the daily slot a record held, to the day it was taken from.
   * Only whoever removed the record (or nulled its account) may call it:
   * that conditional write is the claim on the slot, so it comes back once.
   */
  async releaseSlot(holder: SlotHolder): Promise<void> {
    if (holder.accountId && holder.quotaDay) await this.quota.release(holder.accountId, utcDay(holder.quotaDay));
  }
}
