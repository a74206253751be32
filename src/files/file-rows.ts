// The statements that remove file rows, and the recount of the counters.
// Each removal also takes the file off the account's counters (file_count,
// total_bytes) and queues its object for removal (the upload ledger's SQL,
// src/ledger/statements.ts), in the same single statement: a statement is
// atomic by itself, so any snapshot sees rows and counters agree, and one
// statement is one round trip where a transaction of three would be five
// (BEGIN ... COMMIT), with the account's row locked for the whole of them.
// A file row is added in one place only: the intake's finish
// (src/intake/finish.ts).
import type { PrismaClient } from '../generated/prisma/client.js';
import { queueRemovalsSql } from '../ledger/statements.js';
import { fileEventSql } from '../webhooks/events.js';
import { auditSql, SYSTEM, type Actor } from '../audit/actor.js';

/**
 * Removes the account's file row, takes it off the counters, queues its
 * object for removal (the ledger's record, reason "delete") and writes its
 * file.deleted webhook messages, all or nothing.
 * Returns the object's key, or undefined when the account has no such file.
 */
export async function removeFileRow(prisma: PrismaClient, accountId: number, fileId: number, actor: Actor = SYSTEM): Promise<string | undefined> {
  const now = new Date();
  const rows = await prisma.$queryRaw<{ storage_key: string }[]>`
    WITH removed AS (
      DELETE FROM files WHERE id = ${fileId} AND account_id = ${accountId} RETURNING *
    ), queued AS (${queueRemovalsSql('removed', now)}), counted AS (
      UPDATE accounts SET file_count = file_count - 1, total_bytes = total_bytes - removed.size
      FROM removed WHERE accounts.id = removed.account_id
    ), evented AS (${fileEventSql('file.deleted', 'removed', now)}), audited AS (${auditSql('file.deleted', 'removed', 'account_id', 'id', actor, now)})
    SELECT storage_key FROM removed`;
  return rows[0]?.storage_key;
}

/**
 * Removes up to `limit` files whose expires_at has passed (the oldest
 * first), as removeFileRow does one: rows, counters and the queueing of
 * their objects, their file.deleted webhook messages and audit rows (by the
 * system), in one statement;
 * the sweep then removes the objects.
 * Returns how many files went. SKIP LOCKED: sweeps on several instances
 * take different files.
 */
export async function removeExpiredFiles(prisma: PrismaClient, now: Date, limit: number): Promise<number> {
  const rows = await prisma.$queryRaw<{ storage_key: string }[]>`
    WITH due AS (
      SELECT id FROM files WHERE expires_at <= ${now}::timestamp(3) ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ), removed AS (
      DELETE FROM files WHERE id IN (SELECT id FROM due) RETURNING *
    ), queued AS (${queueRemovalsSql('removed', now)}), counted AS (
      UPDATE accounts SET file_count = file_count - gone.files, total_bytes = total_bytes - gone.bytes
      FROM (SELECT account_id, count(*)::integer AS files, sum(size)::bigint AS bytes FROM removed GROUP BY account_id) gone
      WHERE accounts.id = gone.account_id
    ), evented AS (${fileEventSql('file.deleted', 'removed', now)}), audited AS (${auditSql('file.deleted', 'removed', 'account_id', 'id', SYSTEM, now)})
    SELECT storage_key FROM removed`;
  return rows.length;
}

/** Accounts per recount statement: each statement then stays well inside DATABASE_QUERY_TIMEOUT, however many files there are in all. */
const RECOUNT_BATCH = 200;

/**
 * Recounts every account's files and bytes and corrects the counters that
 * are off (after a manual edit of the tables, or files written by a version
 * that did not count); returns how many accounts were corrected. The bytes
 * reserved by uploads in flight are the ledger's to recount
 * (UploadLedger.recountReservations).
 *
 * One statement per `batch` accounts (in id order), each exact while
 * uploads and deletes go on: it adds the difference seen in its snapshot
 * (actual minus counted) to the counter's current value. Uploads and
 * deletes change rows and counter together, so they never change that
 * difference; a row updated meanwhile is re-read by PostgreSQL before the
 * addition.
 */
export async function recountFiles(prisma: PrismaClient, batch = RECOUNT_BATCH): Promise<number> {
  let fixed = 0;
  for (let after = 0; ; ) {
    const [row] = await prisma.$queryRaw<{ last: number | null; fixed: number }[]>`
      WITH batch AS (
        SELECT id FROM accounts WHERE id > ${after} ORDER BY id LIMIT ${batch}
      ), actual AS (
        SELECT a.id, a.file_count, a.total_bytes, count(f.id)::integer AS files, coalesce(sum(f.size), 0)::bigint AS bytes
        FROM accounts a JOIN batch USING (id) LEFT JOIN files f ON f.account_id = a.id
        GROUP BY a.id
      ), corrected AS (
        UPDATE accounts SET
          file_count = accounts.file_count + (actual.files - actual.file_count),
          total_bytes = accounts.total_bytes + (actual.bytes - actual.total_bytes)
        FROM actual
        WHERE accounts.id = actual.id AND (actual.files <> actual.file_count OR actual.bytes <> actual.total_bytes)
        RETURNING accounts.id
      )
      SELECT (SELECT max(id) FROM batch) AS last, (SELECT count(*) FROM corrected)::integer AS fixed`;
    fixed += row?.fixed ?? 0;
    if (row?.last == null) return fixed;
    after = row.last;
  }
}
