// The statements that add or remove a file row. Each also changes the
// account's counters (file_count, total_bytes) and the pending_objects
// record, in the same single statement: a statement is atomic by itself, so
// any snapshot sees rows and counters agree, and one statement is one round
// trip where a transaction of three would be five (BEGIN ... COMMIT), with
// the account's row locked for the whole of them.
import type { PrismaClient } from '../generated/prisma/client.js';
import { newLinkToken, toFileRecord, type FileRecord } from './record.js';

/** A complete object, ready to become a file. */
export interface StoredFile {
  accountId: number;
  /** Already cleaned (src/files/filename.ts). */
  filename: string;
  /** Bytes. */
  size: number;
  /** Hex SHA-256 of the content. */
  sha256: string;
  /** Key of the object, recorded in pending_objects while it was written. */
  storageKey: string;
}

interface FileRowRaw {
  id: number;
  account_id: number;
  filename: string;
  size: bigint;
  sha256: string;
  storage_key: string;
  link_token: string;
  download_count: bigint;
  created_at: Date;
}

export class UploadSweptError extends Error {
  constructor(storageKey: string) {
    super(`the pending record of ${storageKey} was gone when the upload completed (swept as abandoned)`);
  }
}

/**
 * Makes a stored object a file: drops its pending_objects record, inserts
 * the file row and adds it to the account's counters, all or nothing. Every
 * way of uploading ends here (multipart today, resumable uploads too). If the
 * record is gone (the sweeper judged the upload abandoned and claimed it),
 * nothing is written and UploadSweptError is thrown; the caller then
 * removes the object as for any failed upload.
 */
export async function commitFile(prisma: PrismaClient, file: StoredFile): Promise<FileRecord> {
  // Dates are passed, not left to DEFAULT CURRENT_TIMESTAMP: the columns have
  // no time zone and Prisma writes UTC, whatever the server's TimeZone says.
  const now = new Date();
  const rows = await prisma.$queryRaw<FileRowRaw[]>`
    WITH claimed AS (
      DELETE FROM pending_objects WHERE storage_key = ${file.storageKey} RETURNING storage_key
    ), inserted AS (
      INSERT INTO files (account_id, filename, size, sha256, storage_key, link_token, download_count, created_at)
      SELECT ${file.accountId}, ${file.filename}, ${BigInt(file.size)}, ${file.sha256}, storage_key, ${newLinkToken()}, 0, ${now}::timestamp(3)
      FROM claimed
      RETURNING *
    ), counted AS (
      UPDATE accounts SET file_count = file_count + 1, total_bytes = total_bytes + inserted.size
      FROM inserted WHERE accounts.id = inserted.account_id
    )
    SELECT id, account_id, filename, size, sha256, storage_key, link_token, download_count, created_at FROM inserted`;
  const row = rows[0];
  if (!row) throw new UploadSweptError(file.storageKey);
  return toFileRecord({
    id: row.id,
    accountId: row.account_id,
    filename: row.filename,
    size: BigInt(row.size),
    sha256: row.sha256,
    storageKey: row.storage_key,
    linkToken: row.link_token,
    downloadCount: BigInt(row.download_count),
    createdAt: row.created_at,
  });
}

/**
 * Removes the account's file row, takes it off the counters and queues its
 * object for removal (pending_objects, reason "delete"), all or nothing.
 * Returns the object's key, or undefined when the account has no such file.
 */
export async function removeFileRow(prisma: PrismaClient, accountId: number, fileId: number): Promise<string | undefined> {
  const now = new Date();
  const rows = await prisma.$queryRaw<{ storage_key: string }[]>`
    WITH removed AS (
      DELETE FROM files WHERE id = ${fileId} AND account_id = ${accountId} RETURNING account_id, size, storage_key
    ), queued AS (
      INSERT INTO pending_objects (storage_key, reason, created_at, touched_at)
      SELECT storage_key, 'delete', ${now}::timestamp(3), ${now}::timestamp(3) FROM removed
    ), counted AS (
      UPDATE accounts SET file_count = file_count - 1, total_bytes = total_bytes - removed.size
      FROM removed WHERE accounts.id = removed.account_id
    )
    SELECT storage_key FROM removed`;
  return rows[0]?.storage_key;
}

/**
 * Recounts every account's files and bytes and corrects the counters that
 * are off (after a manual edit of the tables, or files written by a version
 * that did not count); returns how many accounts were corrected.
 *
 * One statement, and exact while uploads and deletes go on: it adds the
 * difference seen in its snapshot (actual minus counted) to the counter's
 * current value. Uploads and deletes change rows and counter together, so
 * they never change that difference; a row updated meanwhile is re-read by
 * PostgreSQL before the addition.
 */
export async function recountFiles(prisma: PrismaClient): Promise<number> {
  const fixed = await prisma.$queryRaw<{ id: number }[]>`
    WITH actual AS (
      SELECT a.id, a.file_count, a.total_bytes, count(f.id)::integer AS files, coalesce(sum(f.size), 0)::bigint AS bytes
      FROM accounts a LEFT JOIN files f ON f.account_id = a.id
      GROUP BY a.id
    )
    UPDATE accounts SET
      file_count = accounts.file_count + (actual.files - actual.file_count),
      total_bytes = accounts.total_bytes + (actual.bytes - actual.total_bytes)
    FROM actual
    WHERE accounts.id = actual.id AND (actual.files <> actual.file_count OR actual.bytes <> actual.total_bytes)
    RETURNING accounts.id`;
  return fixed.length;
}
