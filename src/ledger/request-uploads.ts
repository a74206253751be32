// File requests' part of the upload ledger (issue 50): what uploads through a
// request hold (a place of its max_files, the owner's daily slot, bytes
// reserved against the owner's storage quota), given back when the request
// is closed or an upload's time through it ran out, and shown to the owner.
// Apart from ledger.ts: these statements end many records at once, where
// ledger.ts's end one upload each.
//
// Settling a record here is what ledger.endUpload does to one: the record
// stays (it names an object the sweep must still remove) but holds nothing
// more: its account, day and reservation are cleared in the statement that
// gives the slot and the bytes back, so they come back exactly once (a
// record with no account holds nothing, whichever statement cleared it).
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { Transaction } from './ledger.js';
import { holdsPlaceSql } from './statements.js';

/**
 * CTEs following the CTE `held` (records being settled: storage_key,
 * account_id, quota_day, reserved_bytes; any number of them) that clear
 * them and give back their reservations and daily slots, summed per account
 * and per day (an UPDATE ... FROM counts a target row once, however many
 * rows join it). `place` also frees the place the record holds.
 */
const settleHeld = (place: boolean) => Prisma.sql`
  settled AS (
    UPDATE pending_objects SET account_id = NULL, quota_day = NULL, reserved_bytes = 0, blocked_since = NULL
      ${place ? Prisma.sql`, request_id = NULL` : Prisma.empty}
    FROM held WHERE pending_objects.storage_key = held.storage_key
  ), reservations_back AS (
    UPDATE accounts SET reserved_bytes = accounts.reserved_bytes - back.bytes
    FROM (SELECT account_id, sum(reserved_bytes)::bigint AS bytes FROM held GROUP BY account_id) back
    WHERE accounts.id = back.account_id AND back.bytes > 0
  ), slots_back AS (
    UPDATE daily_uploads SET count = GREATEST(daily_uploads.count - back.slots, 0)
    FROM (SELECT account_id, quota_day, count(*)::integer AS slots FROM held WHERE quota_day IS NOT NULL GROUP BY account_id, quota_day) back
    WHERE daily_uploads.account_id = back.account_id AND daily_uploads.day = back.quota_day
  )`;

/**
 * A CTE over `held` (pending records being ended with their file request)
 * that makes their tus uploads expire at `now`, for good: no request can
 * lock them again, and the sweep removes them once nobody holds them.
 */
const endUploadsSql = (held: 'held', now: Date) => Prisma.sql`
  UPDATE resumable_uploads SET expires_at = LEAST(resumable_uploads.expires_at, ${now}::timestamp(3)), deadline = ${now}::timestamp(3)
  FROM ${Prisma.raw(held)} WHERE resumable_uploads.storage_key = ${Prisma.raw(held)}.storage_key`;

/** As endUploadsSql, for the direct uploads among `held`: they expire now, and the sweep aborts them. */
const endDirectSql = (held: 'held', now: Date) => Prisma.sql`
  UPDATE direct_uploads SET expires_at = LEAST(direct_uploads.expires_at, ${now}::timestamp(3))
  FROM ${Prisma.raw(held)} WHERE direct_uploads.storage_key = ${Prisma.raw(held)}.storage_key`;

/**
 * Closing request `requestId` (in `tx`, which has just marked it closed and
 * so holds its row lock: no new place can be taken meanwhile, and this
 * statement, with a snapshot of its own, sees every place taken before):
 * settles the records of every upload in progress through it and gives
 * back their slots and reservations, in one statement; the tus uploads
 * among them are made expired (endUploadsSql), so nobody can write to them
 * again. Their request_id stays: the statement that would save one as a
 * file refuses it for its closed request (requestOpenSql). Returns how many
 * uploads were ended.
 */
export async function settleRequestUploads(tx: Transaction, requestId: string, now: Date): Promise<number> {
  const [row] = await tx.$queryRaw<{ ended: number }[]>`
    WITH held AS (
      SELECT storage_key, account_id, quota_day, reserved_bytes FROM pending_objects
      WHERE request_id = ${requestId} AND reason <> 'delete' AND account_id IS NOT NULL
      FOR UPDATE
    ), ${settleHeld(false)}, ended AS (${endUploadsSql('held', now)}), direct_ended AS (${endDirectSql('held', now)})
    SELECT count(*)::integer AS ended FROM held`;
  return row?.ended ?? 0;
}

/**
 * Gives back what tus uploads through file requests hold once their time
 * ran out (their row expired: REQUEST_UPLOAD_EXPIRY after creation at the
 * latest) and no request writes to them: the place, the daily slot and the
 * reservation, in one statement, without waiting for the sweep, which
 * removes their bytes later. Nothing can write to them again (a lock needs
 * an unexpired row). Returns how many.
 */
export async function lapseRequestUploads(prisma: PrismaClient, now: Date): Promise<number> {
  const [row] = await prisma.$queryRaw<{ lapsed: number }[]>`
    WITH held AS (
      SELECT p.storage_key, p.account_id, p.quota_day, p.reserved_bytes
      FROM pending_objects p JOIN resumable_uploads r ON r.storage_key = p.storage_key
      WHERE p.request_id IS NOT NULL AND p.reason = 'resumable' AND p.account_id IS NOT NULL
        AND r.expires_at <= ${now}::timestamp(3) AND (r.locked_until IS NULL OR r.locked_until <= ${now}::timestamp(3))
      FOR UPDATE OF p SKIP LOCKED
    ), ${settleHeld(true)}
    SELECT count(*)::integer AS lapsed FROM held`;
  return row?.lapsed ?? 0;
}

/** What the uploads in progress through one request hold. */
export interface HeldByRequest {
  uploads: number;
  /** Bytes reserved against the quota, or stored so far by a tus upload, whichever is more (a plain upload on a plan without a quota reserves none). */
  bytes: number;
}

/** What the uploads in progress through each of `requestIds` hold (requests with none are absent): one query. */
export async function heldByRequests(prisma: PrismaClient, requestIds: string[]): Promise<Map<string, HeldByRequest>> {
  if (requestIds.length === 0) return new Map();
  const rows = await prisma.$queryRaw<{ request_id: string; uploads: number; bytes: bigint }[]>`
    SELECT p.request_id, count(*)::integer AS uploads, coalesce(sum(GREATEST(p.reserved_bytes, coalesce(r.upload_offset, 0))), 0)::bigint AS bytes
    FROM pending_objects p LEFT JOIN resumable_uploads r ON r.storage_key = p.storage_key
    WHERE p.request_id IN (${Prisma.join(requestIds)}) AND p.reason <> 'delete' AND p.account_id IS NOT NULL
    GROUP BY p.request_id`;
  return new Map(rows.map((row) => [row.request_id, { uploads: row.uploads, bytes: Number(row.bytes) }]));
}

/** Whether tus upload `uploadId` came through request `requestId` (its place is held, or it became the request's file). */
export async function isUploadOf(prisma: PrismaClient, requestId: string, uploadId: string): Promise<boolean> {
  const rows = await prisma.$queryRaw<{ ok: number }[]>`
    SELECT 1 AS ok FROM resumable_uploads r
    WHERE r.id = ${uploadId} AND (
      ${holdsPlaceSql('r', requestId)} OR
      EXISTS (SELECT 1 FROM files f WHERE f.storage_key = r.storage_key AND f.request_id = ${requestId}))`;
  return rows.length > 0;
}
