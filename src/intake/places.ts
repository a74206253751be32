// A file request's places (max_files), exact across requests and instances.
// A place is taken by an upload in flight (its pending_objects record carries
// the request_id: the upload ledger's SQL, src/ledger/statements.ts) or by a
// file received (files.request_id). Nothing counts
// them apart from those rows, so every way an upload ends gives its place
// back with the statement that already ends it: the commit turns the record
// into the file (one statement: the count stays), an abort, a tus
// termination, an expiry or a sweep drops the record (the place is free).
// A place is taken by the intake's open() (intake.ts), before a byte of the
// upload is read, whatever its transport. Taking a place locks the request's row first, so two uploads cannot both
// count the last free place: at READ COMMITTED each later statement of the
// transaction sees every place taken by those who held the lock before.
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { markPlaceSql, placesInFlightSql, recordOfSql } from '../ledger/statements.js';
import { requestErrors } from '../requests/errors.js';

interface Locked {
  max_files: number | null;
  expires_at: Date | null;
  closed_at: Date | null;
}

/**
 * Gives the upload of `storageKey` (its pending record exists) a place of
 * request `requestId`, or throws why not: 404 request_not_found (closed
 * meanwhile), 410 request_expired, 410 request_full. On a refusal nothing
 * was changed; the caller ends the upload as for any refused upload.
 */
export async function takePlace(prisma: PrismaClient, requestId: string, storageKey: string, now = new Date()): Promise<void> {
  await prisma.$transaction(async (tx) => {
    const [request] = await tx.$queryRaw<Locked[]>`
      SELECT max_files, expires_at, closed_at FROM file_requests WHERE id = ${requestId} FOR UPDATE`;
    if (!request || request.closed_at) throw requestErrors.notFound();
    if (request.expires_at && request.expires_at <= now) throw requestErrors.expired();
    // Counted and marked in one statement: its snapshot is taken after the lock, so it sees every place taken before.
    const marked = await tx.$executeRaw(markPlaceSql(storageKey, requestId, Prisma.sql`(${request.max_files}::integer IS NULL OR ${takenSql(requestId)} < ${request.max_files}::integer)`));
    if (marked === 1) return;
    // Refused: full, unless the record went between its creation and now (swept as abandoned), which fails as at a commit.
    if (request.max_files !== null && (await tx.$queryRaw<unknown[]>(recordOfSql(storageKey))).length === 1) throw requestErrors.full(request.max_files);
    throw requestErrors.notFound();
  });
}

/** Places taken, as an SQL expression: files received and uploads in flight. */
const takenSql = (requestId: string) => Prisma.sql`((SELECT count(*) FROM files WHERE request_id = ${requestId})::integer + ${placesInFlightSql(requestId)})`;
