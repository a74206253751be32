// The database side of resumable uploads: one row per upload in
// resumable_uploads, and its upload ledger record (reason "resumable"),
// which holds the daily-quota slot until the file row replaces it. A request
// writes to an upload only under its lock (locker.ts): a conditional
// UPDATE that checks the offset, that no other lock is live and that the
// upload has not expired, all in one statement, so two requests (on any
// instances) can never both hold one.
import { randomBytes } from 'node:crypto';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { ResumableState } from '../storage/resumable.js';
import { uploadExpiredSql } from '../webhooks/events.js';
import type { PendingRecord, UploadLedger } from '../ledger/ledger.js';
import { holdsResumableSql } from '../ledger/statements.js';
import { toFileRecord, type FileRecord } from '../files/record.js';

export interface ResumableRow {
  id: string;
  accountId: number;
  storageKey: string;
  filename: string;
  /** Undefined while deferred. */
  length?: number;
  offset: number;
  storeState: ResumableState;
  hashState: Uint8Array;
  interrupted: boolean;
  expiresAt: Date;
  /** The latest expiresAt may ever be (an upload through a file request: REQUEST_UPLOAD_EXPIRY after creation); absent: none. */
  deadline?: Date;
  createdAt: Date;
  /** What the file will be given (Upload-Metadata options): seconds it lives, its primary link's rules. */
  fileExpiresIn?: number;
  maxDownloads?: number;
  passwordHash?: string;
}

/** An upload as a client may see it: its row, and the file it became. */
export interface ResumableView extends ResumableRow {
  /** Present once the upload is a file (and while the file exists). */
  file?: FileRecord;
  /** Its pending record still holds the slot: the upload is not yet a file (or finishing was cut short). */
  pending: boolean;
  /** A request holds its lock now. */
  locked: boolean;
}

type Row = Prisma.ResumableUploadGetPayload<object>;

/** An upload claimed for its removal (ResumableRecords.claim). */
export interface RemovalClaim {
  row: ResumableRow;
  /** Its pending record, holding the quota slot; absent once the upload became a file (then the row is already gone). */
  pending?: PendingRecord;
  /** The removal's claim on the row (a lock token of its own). */
  token: string;
  /** Removed by the sweep for its expiry (not by its client): forgetting it writes upload.expired. */
  expired?: boolean;
}

const toRow = (row: Row): ResumableRow => ({
  id: row.id,
  accountId: row.accountId,
  storageKey: row.storageKey,
  filename: row.filename,
  length: row.length === null ? undefined : Number(row.length),
  offset: Number(row.offset),
  storeState: row.storeState as unknown as ResumableState,
  hashState: row.hashState,
  interrupted: row.interrupted,
  expiresAt: row.expiresAt,
  deadline: row.deadline ?? undefined,
  createdAt: row.createdAt,
  fileExpiresIn: row.fileExpiresIn ?? undefined,
  maxDownloads: row.maxDownloads ?? undefined,
  passwordHash: row.passwordHash ?? undefined,
});

/** The URL token of an upload: 128 random bits, base64url (22 characters). */
export const newUploadId = () => randomBytes(16).toString('base64url');
/** Whether `id` has the form newUploadId gives (22 base64url characters). */
export const isUploadId = (id: string) => /^[A-Za-z0-9_-]{22}$/.test(id);

const json = (state: ResumableState) => state as unknown as Prisma.InputJsonValue;
const bytes = (state: Uint8Array) => new Uint8Array(state) as Uint8Array<ArrayBuffer>;
/** No live lock at `now`. */
const unlocked = (now: Date) => ({ OR: [{ lockedUntil: null }, { lockedUntil: { lte: now } }] });

export interface NewUpload {
  id: string;
  accountId: number;
  storageKey: string;
  filename: string;
  length?: number;
  storeState: ResumableState;
  hashState: Uint8Array;
  expiresAt: Date;
  deadline?: Date;
  createdAt: Date;
  fileExpiresIn?: number;
  maxDownloads?: number;
  passwordHash?: string;
}

export class ResumableRecords {
  constructor(
    private readonly prisma: PrismaClient,
    /** The owner of the pending record each upload has (reason "resumable"). */
    private readonly ledger: UploadLedger,
  ) {}

  /**
   * The upload's row, and its pending record (opened by the intake, holding
   * its slot and place) marked as a tus upload's, together.
   */
  async create(fields: NewUpload): Promise<ResumableRow> {
    const [row] = await this.prisma.$transaction([
      this.prisma.resumableUpload.create({
        data: { ...fields, length: fields.length === undefined ? null : BigInt(fields.length), storeState: json(fields.storeState), hashState: bytes(fields.hashState) },
      }),
      this.ledger.markResumable(fields.storageKey, fields.storeState.uploadId),
    ]);
    return toRow(row);
  }

  /** The account's upload, with its file and the state of its records; undefined for another account's. */
  async find(id: string, accountId: number, now: Date): Promise<ResumableView | undefined> {
    const row = await this.prisma.resumableUpload.findUnique({ where: { id, accountId } });
    if (!row) return undefined;
    // Two lookups by unique key, side by side: one round trip's wait.
    const [file, pending] = await Promise.all([
      this.prisma.file.findUnique({ where: { storageKey: row.storageKey } }),
      this.ledger.holdsResumable(row.storageKey),
    ]);
    return {
      ...toRow(row),
      file: file ? toFileRecord(file) : undefined,
      pending,
      locked: row.lockedUntil !== null && row.lockedUntil > now,
    };
  }

  /**
   * Locks the upload for `token` until `until`, if it is the account's, not
   * expired, not locked, and (when given) at `offset`.
   */
  async lock(id: string, accountId: number, token: string, now: Date, until: Date, offset?: number): Promise<ResumableRow | undefined> {
    const rows = await this.prisma.resumableUpload.updateManyAndReturn({
      where: { id, accountId, expiresAt: { gt: now }, ...(offset === undefined ? {} : { offset: BigInt(offset) }), ...unlocked(now) },
      data: { lockToken: token, lockedUntil: until },
    });
    return rows[0] ? toRow(rows[0]) : undefined;
  }

  /** Until when the account's upload is locked (null: not locked; undefined: no such upload). */
  async lockedUntil(id: string, accountId: number): Promise<Date | null | undefined> {
    const row = await this.prisma.resumableUpload.findUnique({ where: { id, accountId }, select: { lockedUntil: true } });
    return row?.lockedUntil;
  }

  /** Extends a lock; false when it is no longer ours. */
  async renew(id: string, token: string, until: Date): Promise<boolean> {
    const { count } = await this.prisma.resumableUpload.updateMany({ where: { id, lockToken: token }, data: { lockedUntil: until } });
    return count === 1;
  }

  /** Ends the lock of `token` (UploadLock.unlock, its only caller) without changing anything else. */
  async unlock(id: string, token: string): Promise<void> {
    await this.prisma.resumableUpload.updateMany({ where: { id, lockToken: token }, data: { lockToken: null, lockedUntil: null } });
  }

  /** Saves a store state that must survive a crash mid-request (a new multipart upload), where the sweeper sees it too. */
  async saveStoreState(row: ResumableRow, token: string, state: ResumableState): Promise<void> {
    await this.prisma.$transaction([
      this.prisma.resumableUpload.updateMany({ where: { id: row.id, lockToken: token }, data: { storeState: json(state) } }),
      this.ledger.setResumableUploadId(row.storageKey, state.uploadId),
    ]);
  }

  /** Records what an append stored, under the lock of `token`, which stays held. False when the lock was lost (nothing saved). */
  async commit(
    id: string,
    token: string,
    next: { offset: number; length?: number; storeState: ResumableState; hashState: Uint8Array; interrupted: boolean; expiresAt: Date },
  ): Promise<boolean> {
    const { count } = await this.prisma.resumableUpload.updateMany({
      where: { id, lockToken: token },
      data: {
        offset: BigInt(next.offset),
        length: next.length === undefined ? undefined : BigInt(next.length),
        storeState: json(next.storeState),
        hashState: bytes(next.hashState),
        interrupted: next.interrupted,
        expiresAt: next.expiresAt,
      },
    });
    return count === 1;
  }

  /**
   * Claims the upload for its removal, all or nothing; `where` says whose
   * turn it is (our lock, or expired and unlocked). An upload that became
   * a file (its pending record is gone) only loses its row: the object is
   * the file's. Otherwise nothing is deleted yet (delete, then forget): the
   * row is made expired, so no request can lock it again, and claimed by
   * `claim.token` until `claim.until`. The removal forgets both records only
   * once the store has discarded the bytes (forget()); one that dies before
   * leaves them, and the sweep removes the upload once the claim ran out.
   * Undefined when the row did not match.
   */
  async claim(id: string, where: { token: string } | { expiredAt: Date }, claim: { token: string; until: Date; now: Date }): Promise<RemovalClaim | undefined> {
    return this.prisma.$transaction(async (tx) => {
      const condition = 'token' in where ? { lockToken: where.token } : { expiresAt: { lte: where.expiredAt }, ...unlocked(where.expiredAt) };
      const [row] = await tx.resumableUpload.updateManyAndReturn({
        where: { id, ...condition },
        data: { lockToken: claim.token, lockedUntil: claim.until, expiresAt: claim.now },
      });
      if (!row) return undefined;
      const pending = await this.ledger.resumableRecord(tx, row.storageKey);
      if (!pending) await tx.resumableUpload.delete({ where: { id } });
      return { row: toRow(row), pending, token: claim.token, expired: !('token' in where) };
    });
  }

  /**
   * After the store discarded the upload's bytes: its row and pending record
   * go together, if the claim is still ours. True when this removed the
   * pending record, and so holds the quota slot it recorded (exactly once:
   * a removal whose claim ran out and was taken over forgets nothing).
   */
  async forget(claimed: RemovalClaim, now = new Date()): Promise<boolean> {
    return this.prisma.$transaction(async (tx) => {
      const { count } = await tx.resumableUpload.deleteMany({ where: { id: claimed.row.id, lockToken: claimed.token } });
      if (count === 0) return false;
      const forgotten = await this.ledger.forgetResumable(tx, claimed.row.storageKey);
      // Swept unfinished: the upload.expired messages commit with the forgetting, or neither.
      if (forgotten && claimed.expired) await tx.$executeRaw(uploadExpiredSql(claimed.row, now));
      return forgotten;
    });
  }

  /** Ends a removal's claim without forgetting anything (the store could not discard): the next sweep tries again. */
  async letGo(claimed: RemovalClaim): Promise<void> {
    await this.prisma.resumableUpload.updateMany({ where: { id: claimed.row.id, lockToken: claimed.token }, data: { lockToken: null, lockedUntil: null } });
  }

  /**
   * The account's unfinished uploads that have not expired at `now`, newest
   * first, a page of `limit` after `(page - 1) * limit`, and how many there
   * are. Unfinished: its pending record still holds it (an upload that became
   * a file keeps its row a while, without that record).
   */
  async unfinished(accountId: number, now: Date, page: number, limit: number): Promise<{ rows: ResumableRow[]; total: number }> {
    const where = Prisma.sql`r.account_id = ${accountId} AND r.expires_at > ${now}::timestamp(3)
      AND ${holdsResumableSql('r')}`;
    const [rows, counted] = await Promise.all([
      this.prisma.$queryRaw<{ id: string }[]>`
        SELECT r.id FROM resumable_uploads r WHERE ${where} ORDER BY r.created_at DESC, r.id DESC
        OFFSET ${(page - 1) * limit} LIMIT ${limit}`,
      this.prisma.$queryRaw<{ total: number }[]>`SELECT count(*)::integer AS total FROM resumable_uploads r WHERE ${where}`,
    ]);
    // Rows by id, in the page's order (the raw query picks them; Prisma maps their columns).
    const found = await this.prisma.resumableUpload.findMany({ where: { id: { in: rows.map((r) => r.id) } } });
    const byId = new Map(found.map((row) => [row.id, toRow(row)]));
    return { rows: rows.flatMap((r) => byId.get(r.id) ?? []), total: counted[0]?.total ?? 0 };
  }

  /** Ids of expired, unlocked uploads (at most `limit`), oldest first. */
  async expired(now: Date, limit: number): Promise<string[]> {
    const rows = await this.prisma.resumableUpload.findMany({
      where: { expiresAt: { lte: now }, ...unlocked(now) },
      orderBy: { expiresAt: 'asc' },
      take: limit,
      select: { id: true },
    });
    return rows.map((r) => r.id);
  }
}
