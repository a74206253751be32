import type { Caller } from '../accounts/service.js';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import { fileErrors } from './errors.js';
import type { UploadQuota } from './quota.js';
import { toFileRecord, type FileRecord } from './record.js';
import { Upload } from './upload.js';

export interface FileServiceOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  quota: UploadQuota;
  /** Called with errors of clean-up work that must not fail the request (removing an object, returning a slot). */
  onCleanupError: (err: unknown) => void;
}

const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];

export class FileService {
  constructor(private readonly options: FileServiceOptions) {}

  /** Takes a slot of the daily upload quota (403 when none is left) and returns the upload to feed. */
  async startUpload(caller: Caller): Promise<Upload> {
    const { prisma, store, quota, onCleanupError } = this.options;
    const limit = caller.plan.dailyUploads;
    const slot = await quota.take(caller.accountId, limit);
    if (!slot) throw fileErrors.dailyUploadLimit(limit);
    return new Upload(prisma, store, caller, slot, onCleanupError);
  }

  async list(accountId: number, page: number, limit: number): Promise<{ files: FileRecord[]; total: number }> {
    const { prisma } = this.options;
    const [total, rows] = await prisma.$transaction([
      prisma.file.count({ where: { accountId } }),
      prisma.file.findMany({ where: { accountId }, orderBy: newestFirst, skip: (page - 1) * limit, take: limit }),
    ]);
    return { total, files: rows.map(toFileRecord) };
  }

  /** The account's file; another account's file is as missing as a file that never existed. */
  async get(accountId: number, fileId: number): Promise<FileRecord> {
    const row = await this.options.prisma.file.findFirst({ where: { id: fileId, accountId } });
    if (!row) throw fileErrors.notFound();
    return toFileRecord(row);
  }

  /** Removes the row, then the object: a failure in between leaves an unreachable object, never a row without one. */
  async delete(accountId: number, fileId: number): Promise<void> {
    const { prisma, store, onCleanupError } = this.options;
    const row = await prisma.file
      .delete({ where: { id: fileId, accountId }, select: { storageKey: true } })
      .catch((err: unknown) => {
        if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2025') throw fileErrors.notFound();
        throw err;
      });
    await store.delete(row.storageKey).catch(onCleanupError);
  }

  async findByLinkToken(token: string): Promise<FileRecord | undefined> {
    const row = await this.options.prisma.file.findUnique({ where: { linkToken: token } });
    return row ? toFileRecord(row) : undefined;
  }

  /** One more complete download, counted in the database so concurrent downloads all count. */
  async countDownload(fileId: number): Promise<void> {
    await this.options.prisma.file.updateMany({ where: { id: fileId }, data: { downloadCount: { increment: 1 } } });
  }

  async stats(accountId: number): Promise<{ totalFiles: number; totalSize: number }> {
    const result = await this.options.prisma.file.aggregate({
      where: { accountId },
      _count: { _all: true },
      _sum: { size: true },
    });
    return { totalFiles: result._count._all, totalSize: Number(result._sum.size ?? 0n) };
  }
}
