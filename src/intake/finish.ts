// Where an upload becomes a file, for every transport: one statement drops
// the upload's ledger record, inserts the file row and its primary link,
// moves its reservation to the account's stored bytes, and writes its
// file.uploaded webhook messages and audit row, all or nothing. The ledger
// owns the SQL on its tables (src/ledger/statements.ts); the intake runs it.
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { newLinkToken, primaryLinkSql, type LinkRules } from '../links/links.js';
import { claimForFileSql, requestOfRecordSql, storedFromReservationSql } from '../ledger/statements.js';
import { uploadEnded } from '../files/errors.js';
import { after } from '../files/upload-options.js';
import { fromFileColumns, newFileId, type FileColumns, type FileRecord } from '../files/record.js';
import { fileEventSql } from '../webhooks/events.js';
import { auditSql, SYSTEM, type Actor } from '../audit/actor.js';

/** A complete object, ready to become a file. */
export interface StoredFile {
  accountId: number;
  /** Already cleaned (src/files/filename.ts). */
  filename: string;
  /** Bytes. */
  size: number;
  /** Hex SHA-256 of the content; null when the service never saw the bytes and the client declared none (src/direct/). */
  sha256: string | null;
  /** Key of the object, recorded in the upload ledger while it was written. */
  storageKey: string;
  /** Seconds from the commit to the file's expiry; none: it never expires. */
  expiresIn?: number;
  /** Rules of the file's primary link (none: a plain public link). */
  primaryLink?: LinkRules;
  /** Who uploaded it, for the audit row written with it. */
  actor?: Actor;
  /** The commit's time (the intake's clock): the file's created_at, and expiresIn counts from it. */
  now?: Date;
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
 * transport ends here, through Intake.finish (intake.ts). If the
 * record is gone or claimed (the sweeper judged the upload abandoned),
 * nothing is written and UploadSweptError is thrown; the caller then
 * removes the object as for any failed upload. A file request's upload
 * (places.ts) carries its request_id on the pending record,
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
  const now = file.now ?? new Date();
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
