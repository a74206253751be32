// The rows of direct uploads (direct_uploads, prisma/schema.prisma): what the
// upload will become and until when it may. Its ledger record (reason
// "direct") holds the slot, reservation and place; the row goes with the
// record (ON DELETE CASCADE), so the statement that makes the file, or the
// one that forgets an abandoned upload, removes both.
import { randomBytes } from 'node:crypto';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';

export interface DirectRow {
  id: string;
  accountId: number;
  storageKey: string;
  uploadId: string;
  filename: string;
  size: number;
  partSize: number;
  sha256?: string;
  requestId?: string;
  fileExpiresIn?: number;
  maxDownloads?: number;
  passwordHash?: string;
  expiresAt: Date;
  createdAt: Date;
}

/** Which uploads a caller may reach: an account's own (no request), or those through one file request. */
export interface DirectScope {
  accountId: number;
  requestId?: string;
}

/** The upload's id in the API: 128 random bits, base64url (22 characters). */
export const newDirectId = () => randomBytes(16).toString('base64url');
const ID = /^[A-Za-z0-9_-]{22}$/;

type Row = NonNullable<Awaited<ReturnType<PrismaClient['directUpload']['findFirst']>>>;

const toRow = (row: Row): DirectRow => ({
  id: row.id,
  accountId: row.accountId,
  storageKey: row.storageKey,
  uploadId: row.uploadId,
  filename: row.filename,
  size: Number(row.size),
  partSize: Number(row.partSize),
  sha256: row.sha256 ?? undefined,
  requestId: row.requestId ?? undefined,
  fileExpiresIn: row.fileExpiresIn ?? undefined,
  maxDownloads: row.maxDownloads ?? undefined,
  passwordHash: row.passwordHash ?? undefined,
  expiresAt: row.expiresAt,
  createdAt: row.createdAt,
});

export class DirectRecords {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly ledger: UploadLedger,
  ) {}

  /** The row, and the record opened for it becoming a direct upload's, in one transaction. */
  async create(row: DirectRow): Promise<void> {
    await this.prisma.$transaction([
      this.ledger.markDirect(row.storageKey, row.uploadId),
      this.prisma.directUpload.create({
        data: {
          id: row.id,
          accountId: row.accountId,
          storageKey: row.storageKey,
          uploadId: row.uploadId,
          filename: row.filename,
          size: BigInt(row.size),
          partSize: BigInt(row.partSize),
          sha256: row.sha256,
          requestId: row.requestId,
          fileExpiresIn: row.fileExpiresIn,
          maxDownloads: row.maxDownloads,
          passwordHash: row.passwordHash,
          expiresAt: row.expiresAt,
          createdAt: row.createdAt,
        },
      }),
    ]);
  }

  /**
   * The direct uploads of `scope` not yet completed, aborted or swept: the
   * account's own, or those through one of its file requests. Counted apart,
   * so an outsider's uploads through a link never take the owner's own
   * places (the request's max_files bounds those).
   */
  open(scope: DirectScope): Promise<number> {
    return this.prisma.directUpload.count({ where: { accountId: scope.accountId, requestId: scope.requestId ?? null } });
  }

  /** The upload `id` within `scope`, unexpired at `now`. */
  async find(scope: DirectScope, id: string, now: Date): Promise<DirectRow | undefined> {
    if (!ID.test(id)) return undefined;
    const row = await this.prisma.directUpload.findFirst({
      where: { id, accountId: scope.accountId, requestId: scope.requestId ?? null, expiresAt: { gt: now } },
    });
    return row ? toRow(row) : undefined;
  }

  /**
   * Claims the upload for a complete or an abort (or the sweep) until
   * `until`, if no live claim holds it: one conditional write, so two
   * instances never both act on it.
   */
  async claim(id: string, now: Date, until: Date): Promise<boolean> {
    const { count } = await this.prisma.directUpload.updateMany({
      where: { id, OR: [{ claimedUntil: null }, { claimedUntil: { lte: now } }] },
      data: { claimedUntil: until },
    });
    return count === 1;
  }

  /** Ends the claim `until` (the work failed; the upload stays as it was). */
  async letGo(id: string, until: Date): Promise<void> {
    await this.prisma.directUpload.updateMany({ where: { id, claimedUntil: until }, data: { claimedUntil: null } });
  }

  /** Uploads past their expiry, oldest first, that no live claim holds. */
  async expired(now: Date, limit: number): Promise<DirectRow[]> {
    const rows = await this.prisma.directUpload.findMany({
      where: { expiresAt: { lte: now }, OR: [{ claimedUntil: null }, { claimedUntil: { lte: now } }] },
      orderBy: { expiresAt: 'asc' },
      take: limit,
    });
    return rows.map(toRow);
  }
}
