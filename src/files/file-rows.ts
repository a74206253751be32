// The statements that add or remove a file row. Each also changes the
// account's counters (file_count, total_bytes) and the upload ledger's
// entries (with SQL from src/ledger/statements.ts, their owner), in the same
// single statement: a statement is atomic by itself, so any snapshot sees rows and
// counters agree, and one statement is one round trip where a transaction of
// three would be five (BEGIN ... COMMIT), with the account's row locked for
// the whole of them.
import { randomInt } from 'node:crypto';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { newLinkToken, primaryLinkSql, type LinkRules } from '../links/links.js';
import { claimForFileSql, queueRemovalsSql, requestOfRecordSql, storedFromReservationSql } from '../ledger/statements.js';
import { uploadEnded } from './errors.js';
import { after } from './upload-options.js';
import { fromFileColumns, type FileColumns, type FileRecord } from './record.js';
import { fileEventSql } from '../webhooks/events.js';
import { auditSql, SYSTEM, type Actor } from '../audit/actor.js';

/** A complete object, ready to become a file. */
export interface StoredFile {
  accountId: number;
  /** Already cleaned (src/files/filename.ts). */
  filename: string;
  /** Bytes. */
  size: number;
  /** Hex SHA-256 of the content. */
  sha256: string;
  /** Key of the object, recorded in the upload ledger while it was written. */
  storageKey: string;
  /** Seconds from the commit to the file's expiry; none: it never expires. */
  expiresIn?: number;
  /** Rules of the file's primary link (none: a plain public link). */
  primaryLink?: LinkRules;
  /** Who uploaded it, for the audit row written with it. */
  actor?: Actor;
}

export class UploadSweptError extends Error {
  constructor(storageKey: string) {
    super(`the pending record of ${storageKey} was gone when the upload completed (swept as abandoned)`);
  }
}

/**
 * Makes a stored object a file: drops its upload ledger record, inserts
 * the file row and its primary link (links.ts), adds it to the account's
 * counters and writes its file.uploaded webhook messages, all or nothing. Every
 * way of uploading ends here (multipart today, resumable uploads too). If the
 * record is gone or claimed (the sweeper judged the upload abandoned),
 * nothing is written and UploadSweptError is thrown; the caller then
 * removes the object as for any failed upload. A file request's upload
 * (src/requests/places.ts) carries its request_id on the pending record,
 * and the file row takes it from there; the same statement refuses it if
 * that request is closed or expired by then (UploadEnded, 404
 * request_not_found or 410 request_expired), checked under the request's
 * row lock (src/ledger/statements.ts), and nothing is written.
 */
export async function commitFile(prisma: PrismaClient, file: StoredFile, newId: () => number = newFileId): Promise<FileRecord> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await insertFile(prisma, file, newId());
    } catch (err) {
      // The statement is atomic: a taken id undid the claim too, so trying again is safe.
      if (attempt >= ID_ATTEMPTS || !isIdTaken(err)) throw err;
    }
  }
}

/**
 * A new file id: random in 1..2^31-1 (the column is an integer, as the spec's
 * file_id; JSON and every client read it exactly). Not a sequence: a global
 * counter told every tenant how many files the others had uploaded between
 * two of its own (issue 27). Ids guess nothing else: a file is only ever
 * found together with its account. A taken id (likely only once there are
 * hundreds of millions of files: the chance is files / 2^31) is drawn again.
 */
export const newFileId = () => randomInt(1, MAX_FILE_ID + 1);

/** The largest file id: PostgreSQL's `integer`. */
export const MAX_FILE_ID = 2 ** 31 - 1;

/** Draws before giving up: at a 1-in-10 chance of a taken id, five in a row is 1 in 100,000. */
const ID_ATTEMPTS = 5;

/** Whether `err` is the primary key of files refusing a duplicate id. */
function isIdTaken(err: unknown): boolean {
  if (!(err instanceof Prisma.PrismaClientKnownRequestError)) return false;
  const cause = (err.meta?.driverAdapterError as { cause?: { kind?: string; constraint?: { index?: string; fields?: string[] } } } | undefined)?.cause;
  return cause?.kind === 'UniqueConstraintViolation' && (cause.constraint?.index === 'files_pkey' || cause.constraint?.fields?.join() === 'id');
}

async function insertFile(prisma: PrismaClient, file: StoredFile, id: number): Promise<FileRecord> {
  // Dates are passed, not left to DEFAULT CURRENT_TIMESTAMP: the columns have
  // no time zone and Prisma writes UTC, whatever the server's TimeZone says.
  const now = new Date();
  const expiresAt = file.expiresIn === undefined ? null : after(now, file.expiresIn);
  const rows = await prisma.$queryRaw<FileColumns[]>`
    WITH claimed AS (${claimForFileSql(file.storageKey, now)}), inserted AS (
      INSERT INTO files (id, account_id, filename, size, sha256, storage_key, link_token, download_count, created_at, expires_at, request_id)
      SELECT ${id}, ${file.accountId}, ${file.filename}, ${BigInt(file.size)}, ${file.sha256}, storage_key, ${newLinkToken()}, 0, ${now}::timestamp(3),
        ${expiresAt}::timestamp(3), request_id
      FROM claimed
      RETURNING *
    ), linked AS (${primaryLinkSql('inserted', file.primaryLink ?? {}, now)}), counted AS (
      -- The upload's reservation against the storage quota becomes stored bytes.
      UPDATE accounts SET file_count = file_count + 1, total_bytes = total_bytes + inserted.size,
        ${storedFromReservationSql('claimed')}
      FROM inserted, claimed WHERE accounts.id = inserted.account_id
    ), evented AS (${fileEventSql('file.uploaded', 'inserted', now)}), audited AS (${auditSql('file.uploaded', 'inserted', 'account_id', 'id', file.actor ?? SYSTEM, now)})
    SELECT id, account_id, filename, size, sha256, storage_key, link_token, download_count, created_at, expires_at, request_id FROM inserted`;
  const row = rows[0];
  if (!row) throw await whyNotCommitted(prisma, file.storageKey, now);
  return fromFileColumns(row);
}

/** Why the commit of `storageKey` wrote nothing: its file request ended, else the sweep took its record. Read after the fact: a request closed or expired stays so. */
async function whyNotCommitted(prisma: PrismaClient, storageKey: string, now: Date): Promise<Error> {
  const [request] = await prisma.$queryRaw<{ closed_at: Date | null; expires_at: Date | null }[]>(requestOfRecordSql(storageKey));
  if (request?.closed_at) return uploadEnded.requestClosed();
  if (request?.expires_at && request.expires_at <= now) return uploadEnded.requestExpired();
  return new UploadSweptError(storageKey);
}

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
