import type { Caller } from '../accounts/service.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import { fileErrors } from './errors.js';
import { removeFileRow } from './file-rows.js';
import type { PendingObjects } from './pending.js';
import type { UploadQuota } from './quota.js';
import { LISTED, toFileListing, toFileRecord, type FileListing, type FileRecord } from './record.js';
import { Upload } from './upload.js';

export interface FileServiceOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  quota: UploadQuota;
  pending: PendingObjects;
  /** Called with errors of clean-up work that must not fail the request (removing an object, returning a slot). */
  onCleanupError: (err: unknown) => void;
}

const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];

export class FileService {
  constructor(private readonly options: FileServiceOptions) {}

  /** Takes a slot of the daily upload quota (403 when none is left) and returns the upload to feed. */
  async startUpload(caller: Caller): Promise<Upload> {
    const { prisma, store, quota, pending, onCleanupError } = this.options;
    const limit = caller.plan.dailyUploads;
    const day = await quota.take(caller.accountId, limit);
    if (!day) throw fileErrors.dailyUploadLimit(limit);
    const upload = new Upload(prisma, store, pending, caller, onCleanupError);
    try {
      await pending.recordUpload(upload.key, caller.accountId, day);
    } catch (err) {
      await quota.release(caller.accountId, day).catch(onCleanupError);
      throw err;
    }
    return upload;
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
  async delete(accountId: number, fileId: number): Promise<void> {
    const { prisma, store, onCleanupError } = this.options;
    const storageKey = await removeFileRow(prisma, accountId, fileId);
    if (!storageKey) throw fileErrors.notFound();
    try {
      await store.delete(storageKey);
      await prisma.pendingObject.deleteMany({ where: { storageKey } });
    } catch (err) {
      onCleanupError(err);
    }
  }

  async findByLinkToken(token: string): Promise<FileRecord | undefined> {
    const row = await this.options.prisma.file.findUnique({ where: { linkToken: token } });
    return row ? toFileRecord(row) : undefined;
  }

  /** One more complete download, counted in the database so concurrent downloads all count. */
  async countDownload(fileId: number): Promise<void> {
    await this.options.prisma.file.updateMany({ where: { id: fileId }, data: { downloadCount: { increment: 1 } } });
  }

  /** The account's counters: one row by key (findUnique, so concurrent requests share a query). */
  async stats(accountId: number): Promise<{ totalFiles: number; totalSize: number }> {
    const row = await this.options.prisma.account.findUnique({ where: { id: accountId }, select: { fileCount: true, totalBytes: true } });
    return { totalFiles: row?.fileCount ?? 0, totalSize: Number(row?.totalBytes ?? 0n) };
  }
}
