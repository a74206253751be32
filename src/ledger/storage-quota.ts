// The plan's max_total_size: bytes an account may store in all, exact under
// concurrent uploads on any number of instances. An upload reserves bytes
// before it writes them: accounts.reserved_bytes holds what uploads in
// flight reserved, each upload's share is on its pending_objects record
// (reserved_bytes), and a reservation is one conditional statement on the
// account's row (which PostgreSQL serialises), granted only while
// total_bytes + reserved_bytes stays within the quota. The commit moves an
// upload's bytes from reserved to total in its one statement (statements.ts);
// the statements that settle or drop the record of a failed, swept or
// removed upload give its share back in the same way (ledger.ts), and
// `dropstream gc` recounts reserved_bytes (recountReservations) should one
// ever drift. Part of the upload ledger: built by it, reached through it.
//
// Reservations come in blocks, so a large upload costs a statement per block,
// not per chunk: a block is what the chunk needs plus 1/64 of the room left
// after it (at most BLOCK). Blocks shrink to the chunk's own size near the
// quota, so uploads in flight never hold much more room than they are about
// to use: an upload is refused only when the stored bytes, what the others
// received and their small surplus leave no room for its next chunk. (A
// quarter of the room, tried first, let 8 uploads racing for the last MiB
// reserve it all between them and refuse 7; 1/64 keeps 3 of them, all that fit.)
import { Transform, type TransformCallback } from 'node:stream';
import type { PrismaClient } from '../generated/prisma/client.js';
import { AppError } from '../errors.js';

/** The largest block reserved at once: 64 MiB, a statement per 64 MiB of a large upload. */
export const BLOCK = 64 * 1024 * 1024;
/**
 * How long an upload waits for room at most (others holding it may be slow,
 * not failing), and how often it asks again: from RETRY_MS, doubling up to
 * RETRY_MAX_MS, so a waiting upload costs a few statements a second, not 40.
 */
const WAIT_MS = 10_000;
const RETRY_MS = 25;
const RETRY_MAX_MS = 400;
/** The share of the room left that a reservation takes beyond what it needs. */
const SURPLUS_SHARE = 64;

export class StorageQuotaExceeded extends AppError {
  constructor(readonly limit: number) {
    super('storage_quota_exceeded', `The upload would take the account past its plan's storage of ${limit} bytes`);
  }
}

export class StorageQuota {
  constructor(
    private readonly prisma: PrismaClient,
    /** How long an upload waits for room at most before it gives way. */
    private readonly waitMs = WAIT_MS,
  ) {}

  /**
   * Reserves at least `needed` bytes more for the upload of `storageKey`
   * (its pending record), up to `needed` and 1/64 of the room left
   * after it when `block` (else exactly `needed`); returns the bytes
   * granted, or 0 when `needed` does not fit under `limit`.
   */
  async reserve(accountId: number, storageKey: string, needed: number, limit: number, block = true): Promise<number> {
    const extra = block ? BLOCK : 0;
    // FOR UPDATE in the first CTE waits for a concurrent reservation on the
    // account and then reads its result, so the room is never counted twice.
    const rows = await this.prisma.$queryRaw<{ amount: bigint }[]>`
      WITH account AS (
        SELECT id, total_bytes, reserved_bytes FROM accounts WHERE id = ${accountId} FOR UPDATE
      ), grant_ AS (
        SELECT ${BigInt(needed)}::bigint + LEAST(${BigInt(extra)}::bigint, (${BigInt(limit)}::bigint - total_bytes - reserved_bytes - ${BigInt(needed)}::bigint) / ${SURPLUS_SHARE}) AS amount
        FROM account
        WHERE total_bytes + reserved_bytes + ${BigInt(needed)}::bigint <= ${BigInt(limit)}::bigint
          AND EXISTS (SELECT 1 FROM pending_objects WHERE storage_key = ${storageKey} AND account_id = ${accountId})
      ), held AS (
        UPDATE pending_objects SET reserved_bytes = pending_objects.reserved_bytes + grant_.amount, blocked_since = NULL
        FROM grant_ WHERE storage_key = ${storageKey}
      ), counted AS (
        UPDATE accounts SET reserved_bytes = accounts.reserved_bytes + grant_.amount FROM grant_ WHERE accounts.id = ${accountId}
      )
      SELECT amount FROM grant_`;
    return Number(rows[0]?.amount ?? 0);
  }

  /** Gives back what the upload holds beyond `keep` bytes (a resumable upload between requests keeps what it stored). */
  async trim(storageKey: string, keep: number): Promise<void> {
    await this.prisma.$executeRaw`
      WITH held AS (
        SELECT storage_key, account_id, reserved_bytes - ${BigInt(keep)}::bigint AS surplus FROM pending_objects
        WHERE storage_key = ${storageKey} AND reserved_bytes > ${BigInt(keep)}::bigint AND account_id IS NOT NULL
        FOR UPDATE
      ), cleared AS (
        UPDATE pending_objects SET reserved_bytes = ${BigInt(keep)}::bigint FROM held WHERE pending_objects.storage_key = held.storage_key
      )
      UPDATE accounts SET reserved_bytes = accounts.reserved_bytes - held.surplus FROM held WHERE accounts.id = held.account_id`;
  }

  /**
   * A check to await before each chunk, with the upload's running total
   * after it: reserves a block when that passes what is reserved. When the
   * quota has no room, the upload waits (its client is held back) while
   * other uploads of the account still make progress, since one of them
   * may fail and give room back; when every upload holding room is waiting
   * too, the youngest of them gives way with 403 storage_quota_exceeded,
   * and the others try again. So uploads racing for the last bytes end with
   * as many stored as fit, the oldest first, and never one byte past the
   * quota. `held` is what the upload already holds. Once `stopped` is
   * aborted (its upload is gone), a wait ends at its next try.
   */
  admitter(accountId: number, storageKey: string, limit: number, held = 0, stopped?: AbortSignal): (after: number) => Promise<void> {
    return async (after) => {
      if (after <= held) return;
      const deadline = Date.now() + this.waitMs;
      let pause = RETRY_MS;
      for (let waiting = false; ; waiting = true) {
        stopped?.throwIfAborted();
        const granted = await this.reserve(accountId, storageKey, after - held, limit);
        if (granted > 0) {
          held += granted;
          return;
        }
        if (!waiting) await this.setWaiting(storageKey, true);
        if (Date.now() >= deadline || (await this.mustGiveWay(accountId, storageKey))) {
          await this.setWaiting(storageKey, false);
          throw new StorageQuotaExceeded(limit);
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(deadline - Date.now(), 0))));
        pause = Math.min(pause * 2, RETRY_MAX_MS);
      }
    };
  }

  private async setWaiting(storageKey: string, waiting: boolean): Promise<void> {
    await this.prisma.pendingObject.updateMany({ where: { storageKey }, data: { blockedSince: waiting ? new Date() : null } });
  }

  /** Whether no other upload holding room makes progress, and this is the youngest of those waiting. */
  private async mustGiveWay(accountId: number, storageKey: string): Promise<boolean> {
    const rows = await this.prisma.$queryRaw<{ give_way: boolean }[]>`
      SELECT NOT EXISTS (
          SELECT 1 FROM pending_objects
          WHERE account_id = ${accountId} AND storage_key <> ${storageKey} AND reserved_bytes > 0 AND blocked_since IS NULL
            -- A resumable upload between requests holds what it stored but makes no progress;
            -- a direct upload's bytes go to the store, never through a wait here.
            AND reason <> 'direct'
            AND (reason <> 'resumable' OR EXISTS (
              SELECT 1 FROM resumable_uploads r WHERE r.storage_key = pending_objects.storage_key AND r.locked_until > ${new Date()}::timestamp(3)
            ))
        ) AND NOT EXISTS (
          SELECT 1 FROM pending_objects other
          WHERE other.account_id = ${accountId} AND other.storage_key <> ${storageKey} AND other.blocked_since IS NOT NULL
            AND (other.created_at, other.storage_key) > (me.created_at, me.storage_key)
        ) AS give_way
      FROM pending_objects me WHERE me.storage_key = ${storageKey}`;
    return rows[0]?.give_way ?? true;
  }

  /** What the upload of `storageKey` holds against the quota now (its pending record's share). */
  async held(storageKey: string): Promise<number> {
    const row = await this.prisma.pendingObject.findUnique({ where: { storageKey }, select: { reservedBytes: true } });
    return Number(row?.reservedBytes ?? 0n);
  }

  /** The room left, without reserving it: for refusing a declared size up front. */
  async room(accountId: number, limit: number): Promise<number> {
    const row = await this.prisma.account.findUnique({ where: { id: accountId }, select: { totalBytes: true, reservedBytes: true } });
    return limit - Number(row?.totalBytes ?? 0n) - Number(row?.reservedBytes ?? 0n);
  }

  /** A pass-through stream that lets no byte by before it is reserved (admitter), for a plain upload. */
  gate(accountId: number, storageKey: string, limit: number): Transform {
    // Destroyed (the client left, the store failed): a wait for room stops
    // instead of reserving for an upload that is being cleaned up.
    const gone = new AbortController();
    const admit = this.admitter(accountId, storageKey, limit, 0, gone.signal);
    let passed = 0;
    return new Transform({
      transform(chunk: Buffer, _encoding, done: TransformCallback) {
        admit(passed + chunk.length).then(() => {
          passed += chunk.length;
          done(null, chunk);
        }, done);
      },
      destroy(err, done) {
        gone.abort();
        done(err);
      },
    });
  }
}
