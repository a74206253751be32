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
  RETURNING storage_key, reserved_bytes, request_id`;

/**
 * Records the objects of the rows of `removed` (a CTE with a storage_key
 * column) for removal (reason "delete"): a CTE for removeFileRow's single
 * statement, so a file row never goes without its object being recorded.
 */
export const queueRemovalsSql = (removed: 'removed', now: Date) => Prisma.sql`
  INSERT INTO pending_objects (storage_key, reason, created_at, touched_at)
  SELECT storage_key, 'delete', ${now}::timestamp(3), ${now}::timestamp(3) FROM ${Prisma.raw(removed)}`;

/** A record's slot as raw SQL returns it. */
interface Holder {
  account_id: number | null;
  quota_day: Date | null;
}

const slotHolder = (row: Holder): SlotHolder => ({ accountId: row.account_id, quotaDay: row.quota_day });

/**
 * A CTE, following the CTE named `records` (which returns account_id and
 * reserved_bytes of records being dropped or settled) that takes their
 * reservations off their accounts' reserved_bytes: the statement that lets go
 * of a record lets go of its share of the storage quota too (storage-quota.ts).
 */
const giveBackReservation = (records: 'gone' | 'held') => Prisma.sql`
  given_back AS (
    UPDATE accounts SET reserved_bytes = accounts.reserved_bytes - ${Prisma.raw(records)}.reserved_bytes
    FROM ${Prisma.raw(records)} WHERE accounts.id = ${Prisma.raw(records)}.account_id AND ${Prisma.raw(records)}.reserved_bytes > 0
  )`;

/**
 * Deletes the records `where` selects and gives back their reservations, in
 * one statement; returns the slot each still held (null once settled). `db`
 * is the client, or the transaction the deletion belongs to.
 */
function forgetWhere(db: PrismaClient | Transaction, where: Prisma.Sql): Promise<Holder[]> {
  return db.$queryRaw<Holder[]>`
    WITH gone AS (
      DELETE FROM pending_objects WHERE ${where} RETURNING account_id, quota_day, reserved_bytes
    ), ${giveBackReservation('gone')}
    SELECT account_id, quota_day FROM gone`;
}

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
   * The bytes it reserved against the storage quota go back in the same
   * statement, so a record never loses its account while the account still
   * counts its reservation.
   */
  async settleFailedUpload(storageKey: string, objectGone: boolean): Promise<void> {
    const [settled] = objectGone
      ? await forgetWhere(this.prisma, Prisma.sql`storage_key = ${storageKey}`)
      : await this.prisma.$queryRaw<Holder[]>`
          WITH held AS (
            SELECT storage_key, account_id, quota_day, reserved_bytes FROM pending_objects
            WHERE storage_key = ${storageKey} AND account_id IS NOT NULL FOR UPDATE
          ), settled AS (
            UPDATE pending_objects SET account_id = NULL, quota_day = NULL, reserved_bytes = 0
            FROM held WHERE pending_objects.storage_key = held.storage_key
          ), ${giveBackReservation('held')}
          SELECT account_id, quota_day FROM held`;
    if (settled) await this.releaseSlot(slotHolder(settled));
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

  /**
   * Drops a tus upload's record inside the transaction dropping its row, and
   * gives back what it reserved against the storage quota; true when this
   * removed it, and so holds its slot.
   */
  async forgetResumable(tx: Transaction, storageKey: string): Promise<boolean> {
    const gone = await forgetWhere(tx, Prisma.sql`storage_key = ${storageKey} AND reason = 'resumable'`);
    return gone.length === 1;
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
   * `until` is still ours, and what it reserved against the storage quota
   * goes back with it (one statement). True when it still held its slot
   * (the caller gives it back, once): an upload that settled meanwhile
   * (settleFailedUpload) took its slot back and nulled the account.
   */
  async forgetSwept(row: PendingRecord, until: Date): Promise<boolean> {
    const [gone] = await forgetWhere(this.prisma, Prisma.sql`storage_key = ${row.storageKey} AND claimed_until = ${until}::timestamp(3)`);
    // An account, once nulled, never comes back: non-null means the slot of `row` is still held.
    return gone !== undefined && gone.account_id !== null && gone.quota_day !== null;
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
