// The ledger's parts of other components' single statements: a file row is
// written or removed in one statement with its ledger entries (files/
// file-rows.ts), since a statement is atomic by itself and one round trip,
// where a transaction of three would be five. Each fragment names the CTE it
// follows or the CTE it is; the SQL on the ledger's tables stays here.
import { Prisma } from '../generated/prisma/client.js';

/**
 * Commit: a CTE that drops the record of `storageKey` for its file row,
 * unless a sweep claims it (judged abandoned) or it came through a file
 * request that is closed or expired now (requestOpenSql), returning
 * storage_key and reserved_bytes when the claim succeeded. The slot the
 * record held stays taken: the upload was made.
 */
export const claimForFileSql = (storageKey: string, now: Date) => Prisma.sql`
  DELETE FROM pending_objects
  WHERE storage_key = ${storageKey} AND (claimed_until IS NULL OR claimed_until <= ${now}::timestamp(3))
    AND (request_id IS NULL OR request_id IN (${requestOpenSql(storageKey, now)}))
  RETURNING storage_key, reserved_bytes, request_id`;

/**
 * Commit: the assignment, in the statement's UPDATE of `accounts`, that takes
 * the claimed record's reservation (CTE `claimed`, claimForFileSql) off
 * reserved_bytes as its bytes become stored ones (total_bytes).
 */
export const storedFromReservationSql = (claimed: 'claimed') =>
  Prisma.sql`reserved_bytes = accounts.reserved_bytes - ${Prisma.raw(claimed)}.reserved_bytes`;

/**
 * Deletion: records the objects of the rows of `removed` (a CTE with a
 * storage_key column) for removal (reason "delete"), so a file row never
 * goes without its object being recorded.
 */
export const queueRemovalsSql = (removed: 'removed', now: Date) => Prisma.sql`
  INSERT INTO pending_objects (storage_key, reason, created_at, touched_at)
  SELECT storage_key, 'delete', ${now}::timestamp(3), ${now}::timestamp(3) FROM ${Prisma.raw(removed)}`;

/** A condition on `alias` (a table with storage_key): its tus upload's record still holds it (not yet a file). */
export const holdsResumableSql = (alias: 'r') =>
  Prisma.sql`EXISTS (SELECT 1 FROM pending_objects p WHERE p.storage_key = ${Prisma.raw(alias)}.storage_key AND p.reason = 'resumable')`;

// File requests (src/intake/places.ts): a place of a request is held by an
// upload's record carrying its request_id, so dropping the record (abort,
// termination, expiry, sweep), or ending it (ledger.endUpload clears
// request_id), gives the place back in the same statement.

/** The uploads in flight holding a place of `requestId`, counted (an SQL integer). */
export const placesInFlightSql = (requestId: string) =>
  Prisma.sql`(SELECT count(*) FROM pending_objects WHERE request_id = ${requestId} AND reason <> 'delete')::integer`;

/** Marks the upload of `storageKey` as holding a place of `requestId` where `condition` holds: one row, or none. */
export const markPlaceSql = (storageKey: string, requestId: string, condition: Prisma.Sql) => Prisma.sql`
  UPDATE pending_objects SET request_id = ${requestId}
  WHERE storage_key = ${storageKey} AND reason <> 'delete' AND ${condition}`;

/** One row while the upload of `storageKey` still has its record. */
export const recordOfSql = (storageKey: string) => Prisma.sql`SELECT 1 AS ok FROM pending_objects WHERE storage_key = ${storageKey}`;

/**
 * Commit (claimForFileSql): the id of the file request the upload of
 * `storageKey` came through, if that request is open at `now`, its row
 * locked FOR SHARE. A close (src/requests/service.ts) updates that row, so
 * a commit racing it waits for the close and then sees the request closed
 * (PostgreSQL re-reads a row it waited for): a file is never saved through
 * a request closed or expired before the statement ended. Commits of one
 * request share the lock and do not wait for each other.
 */
const requestOpenSql = (storageKey: string, now: Date) => Prisma.sql`
  SELECT id FROM file_requests
  WHERE id = (SELECT request_id FROM pending_objects WHERE storage_key = ${storageKey})
    AND closed_at IS NULL AND (expires_at IS NULL OR expires_at > ${now}::timestamp(3))
  FOR SHARE`;

/** After a commit wrote nothing: the request of the upload of `storageKey` (closed_at, expires_at), if it came through one and its record is still there. */
export const requestOfRecordSql = (storageKey: string) => Prisma.sql`
  SELECT fr.closed_at, fr.expires_at FROM pending_objects p JOIN file_requests fr ON fr.id = p.request_id WHERE p.storage_key = ${storageKey}`;

/** A condition on `alias` (a table with storage_key): its upload's record holds a place of `requestId`. */
export const holdsPlaceSql = (alias: 'r', requestId: string) =>
  Prisma.sql`EXISTS (SELECT 1 FROM pending_objects p WHERE p.storage_key = ${Prisma.raw(alias)}.storage_key AND p.request_id = ${requestId})`;

// The sweep's walk over the store's objects (src/files/orphans.ts): an
// object no record names (and no file row) is nobody's.

/** A condition: a pending record names the storage key `column` (an upload in progress, one whose clean-up is owed, or a deleted file's object). */
export const recordNamesSql = (column: Prisma.Sql) => Prisma.sql`EXISTS (SELECT 1 FROM pending_objects p WHERE p.storage_key = ${column})`;
