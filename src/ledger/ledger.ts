// The upload ledger: the one module that reads and writes pending_objects,
// daily_uploads and accounts.reserved_bytes (prisma/schema.prisma). Built
// once by the composition root (server.ts) and passed to the intake
// (src/intake: where every upload opens and becomes a file, whatever its
// transport), tus's records and the sweeper (src/files), which orchestrate
// over these operations:
//
//   open     take a daily slot and record the upload (openUpload; markResumable when tus adopts it,
//            markDirect when an upload straight to the store does)
//   reserve  bytes against the storage quota before they are written (storage: admitter, gate, trim)
//   commit   the record becomes a file row (statements.ts: claimForFileSql, storedFromReservationSql,
//            run by the intake's finish)
//   end      a failed upload gives back its slot, reservation and place; its record
//            stays until its clean-up is confirmed (endUpload, cleanedUp; forgetUnwritten
//            when nothing reached the store)
//   abandon  a removed upload's record goes with both (forgetResumable)
//   sweep    claim, remove, forget what nobody finished (dueForSweep, endedForSweep,
//            claim, letGo, retryLater, awaitLateWrite, forgetSwept, unclaimed)
//   repair   recountReservations (`dropstream gc`)
//
// A record names an object that may exist without a file row: an upload in
// progress (reason "upload", "resumable" for a tus upload, "direct" for one
// straight to the store) or the object
// of a deleted file (reason "delete"). An upload's record holds its daily
// slot (account_id, quota_day) and its share of the storage quota
// (reserved_bytes).
//
// Claims are conditional writes, safe across instances. The statement that
// drops a record (or ends it: nulls its account and request) gives back its
// slot and its reservation in the same statement, so both come back once,
// and a crash can never leave them taken by a record that is gone. A sweep
// claims a record with a lease (claimed_until) before touching the store,
// and forgets it only once the store confirmed the removal.
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { OpenUpload } from '../storage/object-store.js';
import { dayDate } from '../utc-day.js';
import { DailyUploads, dailyUploadLimit } from './daily-uploads.js';
import { StorageQuota } from './storage-quota.js';
import { systemClock, type Clock } from '../clock.js';

/** What the pending_objects table is for; see prisma/schema.prisma. */
export type PendingReason = 'upload' | 'resumable' | 'direct' | 'delete';

export type PendingRecord = Prisma.PendingObjectGetPayload<object>;

/** The client of an interactive transaction (prisma.$transaction(async (tx) => ...)). */
export type Transaction = Prisma.TransactionClient;

export interface LedgerOptions {
  clock?: Clock;
  /** How long an upload waits for room under the storage quota at most (storage-quota.ts). */
  storageWaitMs?: number;
}

/**
 * CTEs following the CTE named `records` (account_id, quota_day and
 * reserved_bytes of one record being dropped or settled) that give back
 * what it held: its reservation off the account's reserved_bytes, and its
 * daily slot to the day it was taken from. `records` holds one record at
 * most (one storage key): UPDATE ... FROM counts a target row once however
 * many rows join it.
 */
const giveBack = (records: 'gone' | 'held') => Prisma.sql`
  reservation_back AS (
    UPDATE accounts SET reserved_bytes = accounts.reserved_bytes - ${Prisma.raw(records)}.reserved_bytes
    FROM ${Prisma.raw(records)} WHERE accounts.id = ${Prisma.raw(records)}.account_id AND ${Prisma.raw(records)}.reserved_bytes > 0
  ), slot_back AS (
    UPDATE daily_uploads SET count = daily_uploads.count - 1
    FROM ${Prisma.raw(records)}
    WHERE daily_uploads.account_id = ${Prisma.raw(records)}.account_id AND daily_uploads.day = ${Prisma.raw(records)}.quota_day AND daily_uploads.count > 0
  )`;

/**
 * Deletes the record of `storageKey` that `where` also selects, with its slot
 * and reservation (one statement); true when this deleted it. `db` is the
 * client, or the transaction the deletion belongs to.
 */
async function forgetWhere(db: PrismaClient | Transaction, storageKey: string, where: Prisma.Sql): Promise<boolean> {
  const rows = await db.$queryRaw<{ storage_key: string }[]>`
    WITH gone AS (
      DELETE FROM pending_objects WHERE storage_key = ${storageKey} AND ${where} RETURNING storage_key, account_id, quota_day, reserved_bytes
    ), ${giveBack('gone')}
    SELECT storage_key FROM gone`;
  return rows.length === 1;
}

/** Uploads the account has in progress (plain or tus), read in `tx`: an account is deleted only while it holds none (accounts/service.ts). */
export function uploadsInProgress(tx: Transaction, accountId: number): Promise<number> {
  return tx.pendingObject.count({ where: { accountId, reason: { in: ['upload', 'resumable', 'direct'] } } });
}

export class UploadLedger {
  /** The daily slots (plan's daily_uploads). */
  private readonly daily: DailyUploads;
  /** Reservations against the plan's max_total_size. */
  readonly storage: StorageQuota;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly options: LedgerOptions = {},
  ) {
    this.daily = new DailyUploads(prisma, options.clock);
    this.storage = new StorageQuota(prisma, options.storageWaitMs);
  }

  // Open.

  /**
   * Takes a daily slot (403 daily_upload_limit when `limit` are taken) and
   * starts an upload with it: `start` records it (openUpload's record),
   * after which the record holds the slot. Until then the slot is ours alone, so if `start` fails
   * it is given back here (a failure to give it back goes to
   * `onCleanupError`) and the error goes on.
   */
  async open<T>(accountId: number, limit: number, start: (day: string) => Promise<T>, onCleanupError: (err: unknown) => void): Promise<T> {
    const day = await this.daily.take(accountId, limit);
    if (!day) throw dailyUploadLimit(limit);
    try {
      return await start(day);
    } catch (err) {
      await this.daily.release(accountId, day).catch(onCleanupError);
      throw err;
    }
  }

  /** A plain upload of `storageKey`: a slot under `limit` and its record, before the first byte is written. */
  async openUpload(storageKey: string, accountId: number, limit: number, onCleanupError: (err: unknown) => void): Promise<void> {
    await this.open(accountId, limit, (day) => this.recordUpload(storageKey, accountId, day), onCleanupError);
  }

  /** The record of a plain upload holding the slot of `quotaDay` (open()'s start). */
  async recordUpload(storageKey: string, accountId: number, quotaDay: string): Promise<void> {
    await this.prisma.pendingObject.create({ data: { storageKey, reason: 'upload', accountId, quotaDay: dayDate(quotaDay) } });
  }

  /**
   * An opened upload's record becomes a tus upload's (the sweep then leaves
   * it to the upload's expiry), with the store's handle: a query for the
   * batch transaction that creates its row.
   */
  markResumable(storageKey: string, uploadId: string | undefined) {
    return this.prisma.pendingObject.updateMany({ where: { storageKey, reason: 'upload' }, data: { reason: 'resumable', uploadId } });
  }

  /**
   * An opened upload's record becomes a direct upload's (src/direct/: the
   * client sends the parts to the store; the sweep leaves it to the upload's
   * expiry), with the store's multipart upload id: a query for the batch
   * transaction that creates its row.
   */
  markDirect(storageKey: string, uploadId: string) {
    return this.prisma.pendingObject.updateMany({ where: { storageKey, reason: 'upload' }, data: { reason: 'direct', uploadId } });
  }

  /**
   * A direct upload that will not become a file, once the store confirmed its
   * clean-up: its record goes (its direct_uploads row with it), with its slot,
   * reservation and place; true when this removed it.
   */
  async forgetDirect(storageKey: string): Promise<boolean> {
    return forgetWhere(this.prisma, storageKey, Prisma.sql`reason = 'direct'`);
  }

  /** The store's handle on the incomplete upload, once it has one (the sweep discards it). */
  async setUploadId(storageKey: string, uploadId: string): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { uploadId, touchedAt: (this.options.clock ?? systemClock)() } });
  }

  /** The store's new handle on a tus upload: a query for the batch transaction that saves its state. */
  setResumableUploadId(storageKey: string, uploadId: string | undefined) {
    return this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { uploadId } });
  }

  /** Marks an upload as still alive, so the sweeper leaves it alone. */
  async touch(storageKey: string): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { touchedAt: (this.options.clock ?? systemClock)() } });
  }

  /** Whether a tus upload's record still holds its slot (it is not a file yet). One lookup by key, so concurrent ones batch. */
  async holdsResumable(storageKey: string): Promise<boolean> {
    const row = await this.prisma.pendingObject.findUnique({ where: { storageKey }, select: { reason: true } });
    return row?.reason === 'resumable';
  }

  // End (a plain upload that failed) and abandon.

  /**
   * A plain upload that will not become a file (it was refused, failed, or
   * was cut) ends here, before its clean-up: one statement marks its record
   * ended and gives back its daily slot, its reservation and its file
   * request's place (that conditional write is the claim on them, so they
   * come back once). The record stays, naming the object, until the
   * clean-up is confirmed (cleanedUp) or, when that failed, until the
   * sweep's retries succeed (from now on, retry_at); a write that was cut
   * keeps it until `lateUntil`, when the store can no longer apply that
   * write. A record ended before is left as it is.
   */
  async endUpload(storageKey: string, { now, lateUntil }: { now: Date; lateUntil?: Date }): Promise<void> {
    await this.prisma.$executeRaw`
      WITH held AS (
        SELECT storage_key, account_id, quota_day, reserved_bytes FROM pending_objects
        WHERE storage_key = ${storageKey} AND reason = 'upload' AND ended_at IS NULL FOR UPDATE
      ), ended AS (
        UPDATE pending_objects
        SET ended_at = ${now}::timestamp(3), retry_at = ${now}::timestamp(3), late_until = ${lateUntil ?? null}::timestamp(3),
          account_id = NULL, quota_day = NULL, reserved_bytes = 0, request_id = NULL
        FROM held WHERE pending_objects.storage_key = held.storage_key
      ), ${giveBack('held')}
      SELECT 1`;
  }

  /**
   * A plain upload refused before any byte of it reached the store: its
   * record goes, with its slot, reservation and place, in one statement.
   */
  async forgetUnwritten(storageKey: string): Promise<void> {
    await forgetWhere(this.prisma, storageKey, Prisma.sql`reason = 'upload' AND upload_id IS NULL`);
  }

  /**
   * The store confirmed the clean-up of an ended upload (its own, not a
   * sweep's): the record goes; or, while a cut write of it may still be
   * applied (late_until ahead), it waits for then, when the sweep removes
   * the object once more. Left alone while a sweep holds it.
   */
  async cleanedUp(storageKey: string, now: Date): Promise<void> {
    const unclaimed = Prisma.sql`(claimed_until IS NULL OR claimed_until <= ${now}::timestamp(3))`;
    await this.prisma.$executeRaw`
      WITH gone AS (
        DELETE FROM pending_objects
        WHERE storage_key = ${storageKey} AND ended_at IS NOT NULL AND (late_until IS NULL OR late_until <= ${now}::timestamp(3)) AND ${unclaimed}
        RETURNING storage_key, account_id, quota_day, reserved_bytes
      ), ${giveBack('gone')}, waiting AS (
        UPDATE pending_objects SET retry_at = late_until
        WHERE storage_key = ${storageKey} AND ended_at IS NOT NULL AND late_until > ${now}::timestamp(3) AND ${unclaimed}
      )
      SELECT 1`;
  }

  /** After the store removed the object of a deleted file: nothing is left to remove. */
  async forgetRemoved(storageKey: string): Promise<void> {
    await this.prisma.pendingObject.deleteMany({ where: { storageKey, reason: 'delete' } });
  }

  /** A tus upload's record, read inside the transaction claiming the upload for its removal. */
  async resumableRecord(tx: Transaction, storageKey: string): Promise<PendingRecord | undefined> {
    return (await tx.pendingObject.findUnique({ where: { storageKey, reason: 'resumable' } })) ?? undefined;
  }

  /**
   * Abandons a tus upload: drops its record inside the transaction dropping
   * its row, with its slot and reservation; true when this removed it.
   */
  async forgetResumable(tx: Transaction, storageKey: string): Promise<boolean> {
    return forgetWhere(tx, storageKey, Prisma.sql`reason = 'resumable'`);
  }

  // Sweep (src/files/sweeper.ts).

  /**
   * Records to sweep, oldest first: every deleted file's, and uploads
   * untouched since `cutoff` (tus and direct uploads go when they expire,
   * ended ones by endedForSweep).
   */
  async dueForSweep(cutoff: Date, limit: number): Promise<PendingRecord[]> {
    return this.prisma.pendingObject.findMany({
      where: { OR: [{ reason: 'delete' }, { reason: { notIn: ['resumable', 'direct'] }, endedAt: null, touchedAt: { lte: cutoff } }] },
      orderBy: { touchedAt: 'asc' },
      take: limit,
    });
  }

  /** Ended uploads whose clean-up is owed (endUpload), in the order of their next try (retry_at): those due first. */
  async endedForSweep(limit: number): Promise<PendingRecord[]> {
    return this.prisma.pendingObject.findMany({ where: { endedAt: { not: null } }, orderBy: { retryAt: 'asc' }, take: limit });
  }

  /** An ended upload's clean-up failed again: the claim `until` ends now, and its next try is `retryAt`. */
  async retryLater(storageKey: string, until: Date, retryAt: Date): Promise<void> {
    await this.prisma.pendingObject.updateMany({
      where: { storageKey, claimedUntil: until },
      data: { claimedUntil: null, attempts: { increment: 1 }, retryAt },
    });
  }

  /**
   * A sweep removed what an ended upload's record names, but a cut write of
   * it may still be applied until late_until: the claim `until` ends, and
   * the record waits for then (the next removal forgets it).
   */
  async awaitLateWrite(row: PendingRecord, until: Date): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey: row.storageKey, claimedUntil: until }, data: { claimedUntil: null, retryAt: row.lateUntil } });
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
   * `until` is still ours, with the slot and reservation it still held (an
   * upload that settled meanwhile gave them back already). True when this
   * forgot it.
   */
  async forgetSwept(row: PendingRecord, until: Date): Promise<boolean> {
    return forgetWhere(this.prisma, row.storageKey, Prisma.sql`claimed_until = ${until}::timestamp(3)`);
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

  // Repair.

  /**
   * Puts every account's reserved_bytes back to the sum over its records
   * (after a manual edit, or a reservation an earlier version gave back in
   * a statement of its own that failed); returns how many accounts were
   * corrected. One statement per `batch` accounts, each exact while uploads
   * go on: it adds the difference seen in its snapshot (records minus
   * counter) to the counter's current value, and reservations change record
   * and counter together, so they never change that difference.
   */
  async recountReservations(batch = RECOUNT_BATCH): Promise<number> {
    let fixed = 0;
    for (let after = 0; ; ) {
      const [row] = await this.prisma.$queryRaw<{ last: number | null; fixed: number }[]>`
        WITH batch AS (
          SELECT id FROM accounts WHERE id > ${after} ORDER BY id LIMIT ${batch}
        ), actual AS (
          SELECT a.id, a.reserved_bytes AS counted,
            (SELECT coalesce(sum(p.reserved_bytes), 0) FROM pending_objects p WHERE p.account_id = a.id)::bigint AS reserved
          FROM accounts a JOIN batch USING (id)
        ), corrected AS (
          UPDATE accounts SET reserved_bytes = accounts.reserved_bytes + (actual.reserved - actual.counted)
          FROM actual WHERE accounts.id = actual.id AND actual.reserved <> actual.counted
          RETURNING accounts.id
        )
        SELECT (SELECT max(id) FROM batch) AS last, (SELECT count(*) FROM corrected)::integer AS fixed`;
      fixed += row?.fixed ?? 0;
      if (row?.last == null) return fixed;
      after = row.last;
    }
  }
}

/** Accounts per recount statement: each statement then stays well inside DATABASE_QUERY_TIMEOUT. */
const RECOUNT_BATCH = 200;
