import type { Actor } from '../audit/actor.js';
import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../storage/object-store.js';
import { fileErrors } from './errors.js';
import { removeFileRow } from './file-rows.js';
import { LISTED, toFileListing, type FileListing } from './record.js';

export interface FileServiceOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  /** The upload ledger (daily slots, pending records, storage quota), built once by the composition root. */
  ledger: UploadLedger;
  /** Called with errors of clean-up work that must not fail the request (removing an object). */
  onCleanupError: (err: unknown) => void;
  /** Told of a deleted file, so its downloads in flight end on every instance (src/links/live-downloads.ts). */
  live?: { announce(ended: { file: number }): Promise<void> };
}

const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];

export class FileService {
  constructor(private readonly options: FileServiceOptions) {
  }

  /**
   * One page and the total. The total is the account's counter (one row by
   * key, however many files), read beside the page rather than in a
   * transaction: at READ COMMITTED each statement takes its own snapshot
   * anyway, so BEGIN/COMMIT would only add two round trips.
   */
  async list(accountId: number, page: number, limit: number): Promise<{ files: FileListing[]; total: number }> {
    const { prisma } = this.options;
    const [counters, rows] = await Promise.all([
      prisma.account.findUnique({ where: { id: accountId }, select: { fileCount: true } }),
      prisma.file.findMany({ where: { accountId }, orderBy: newestFirst, skip: (page - 1) * limit, take: limit, select: LISTED }),
    ]);
    return { total: counters?.fileCount ?? 0, files: rows.map(toFileListing) };
  }

  /**
   * The account's file; another account's file is as missing as a file that
   * never existed. findUnique, not findFirst: Prisma batches the findUnique
   * calls of concurrent requests into one query (GET /files/{id} went from
   * 712 to 1303 requests/s at 50 connections, bench/compare-builds.ts).
   */
  async get(accountId: number, fileId: number): Promise<FileListing> {
    const row = await this.options.prisma.file.findUnique({ where: { id: fileId, accountId }, select: LISTED });
    if (!row) throw fileErrors.notFound();
    return toFileListing(row);
  }

  /**
   * Removes the row and, in the same statement, queues its object and takes
   * it off the account's counters (src/files/file-rows.ts); then removes the
   * object. If that fails (or the process dies first), the file is already
   * gone from the API and the sweeper removes the object later.
   */
  async delete(accountId: number, fileId: number, actor?: Actor): Promise<void> {
    const { prisma, store, ledger, onCleanupError } = this.options;
    const storageKey = await removeFileRow(prisma, accountId, fileId, actor);
    if (!storageKey) throw fileErrors.notFound();
    // Its downloads in flight end now, here and on the other instances, before its object goes.
    await this.options.live?.announce({ file: fileId });
    try {
      await store.delete(storageKey);
      await ledger.forgetRemoved(storageKey);
    } catch (err) {
      onCleanupError(err);
    }
  }

  /**
   * The account's counters: one row by key (findUnique, so concurrent
   * requests share a query). `reservedSize`: bytes uploads in progress hold
   * against the plan's storage quota (the upload ledger's reservations; 0
   * on a plan without one), which count toward it as stored bytes do.
   */
  async stats(accountId: number): Promise<{ totalFiles: number; totalSize: number; reservedSize: number }> {
    const row = await this.options.prisma.account.findUnique({ where: { id: accountId }, select: { fileCount: true, totalBytes: true, reservedBytes: true } });
    return { totalFiles: row?.fileCount ?? 0, totalSize: Number(row?.totalBytes ?? 0n), reservedSize: Number(row?.reservedBytes ?? 0n) };
  }
}
