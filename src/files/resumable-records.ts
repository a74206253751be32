// The database side of resumable uploads: one row per upload in
// resumable_uploads, and its pending_objects record (reason "resumable"),
// which holds the daily-quota slot until the file row replaces it. A request
// writes to an upload only under a lease: a conditional UPDATE that checks
// the offset, that no other lease is live and that the upload has not
// expired, all in one statement, so two requests (on any instances) can
// never both hold one.
import { randomBytes } from 'node:crypto';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { ResumableState } from '../storage/resumable.js';
import { toFileRecord, type FileRecord } from './record.js';

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
  createdAt: Date;
}

/** An upload as a client may see it: its row, and the file it became. */
export interface ResumableView extends ResumableRow {
  /** Present once the upload is a file (and while the file exists). */
  file?: FileRecord;
  /** Its pending record still holds the slot: the upload is not yet a file (or finishing was cut short). */
  pending: boolean;
  /** A request holds its lease now. */
  locked: boolean;
}

type Row = Prisma.ResumableUploadGetPayload<object>;

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
  createdAt: row.createdAt,
});

/** The URL token of an upload: 128 random bits, base64url (22 characters). */
export const newUploadId = () => randomBytes(16).toString('base64url');
export const UPLOAD_ID = /^[A-Za-z0-9_-]{22}$/;

const json = (state: ResumableState) => state as unknown as Prisma.InputJsonValue;
const bytes = (state: Uint8Array) => new Uint8Array(state) as Uint8Array<ArrayBuffer>;
/** No live lease at `now`. */
const unlocked = (now: Date) => ({ OR: [{ lockedUntil: null }, { lockedUntil: { lte: now } }] });

export interface NewUpload {
  id: string;
  accountId: number;
  storageKey: string;
  filename: string;
  length?: number;
  storeState: ResumableState;
  hashState: Uint8Array;
  quotaDay: string;
  expiresAt: Date;
  createdAt: Date;
}

export class ResumableRecords {
  constructor(private readonly prisma: PrismaClient) {}

  /** The upload's row and its pending record (holding the quota slot of `quotaDay`), together. */
  async create(upload: NewUpload): Promise<ResumableRow> {
    const { quotaDay, ...fields } = upload;
    const [row] = await this.prisma.$transaction([
      this.prisma.resumableUpload.create({
        data: { ...fields, length: fields.length === undefined ? null : BigInt(fields.length), storeState: json(fields.storeState), hashState: bytes(fields.hashState) },
      }),
      this.prisma.pendingObject.create({
        data: {
          storageKey: upload.storageKey,
          reason: 'resumable',
          accountId: upload.accountId,
          quotaDay: new Date(`${quotaDay}T00:00:00Z`),
          uploadId: upload.storeState.uploadId,
        },
      }),
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
      this.prisma.pendingObject.findUnique({ where: { storageKey: row.storageKey }, select: { reason: true } }),
    ]);
    return {
      ...toRow(row),
      file: file ? toFileRecord(file) : undefined,
      pending: pending?.reason === 'resumable',
      locked: row.lockedUntil !== null && row.lockedUntil > now,
    };
  }

  /**
   * Takes the upload's lease for `token` until `until`, if it is the
   * account's, not expired, not leased, and (when given) at `offset`.
   */
  async lease(id: string, accountId: number, token: string, now: Date, until: Date, offset?: number): Promise<ResumableRow | undefined> {
    const rows = await this.prisma.resumableUpload.updateManyAndReturn({
      where: { id, accountId, expiresAt: { gt: now }, ...(offset === undefined ? {} : { offset: BigInt(offset) }), ...unlocked(now) },
      data: { lockToken: token, lockedUntil: until },
    });
    return rows[0] ? toRow(rows[0]) : undefined;
  }

  /** Extends a lease; false when it is no longer ours. */
  async renew(id: string, token: string, until: Date): Promise<boolean> {
    const { count } = await this.prisma.resumableUpload.updateMany({ where: { id, lockToken: token }, data: { lockedUntil: until } });
    return count === 1;
  }

  /** Ends a lease without changing anything else. */
  async release(id: string, token: string): Promise<void> {
    await this.prisma.resumableUpload.updateMany({ where: { id, lockToken: token }, data: { lockToken: null, lockedUntil: null } });
  }

  /** Saves a store state that must survive a crash mid-request (a new multipart upload), where the sweeper sees it too. */
  async saveStoreState(row: ResumableRow, token: string, state: ResumableState): Promise<void> {
    await this.prisma.$transaction([
      this.prisma.resumableUpload.updateMany({ where: { id: row.id, lockToken: token }, data: { storeState: json(state) } }),
      this.prisma.pendingObject.updateMany({ where: { storageKey: row.storageKey }, data: { uploadId: state.uploadId } }),
    ]);
  }

  /** Records what an append stored; keeps the lease when `keepLease`. False when the lease was lost (nothing saved). */
  async commit(
    id: string,
    token: string,
    next: { offset: number; length?: number; storeState: ResumableState; hashState: Uint8Array; interrupted: boolean; expiresAt: Date; keepLease: boolean },
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
        ...(next.keepLease ? {} : { lockToken: null, lockedUntil: null }),
      },
    });
    return count === 1;
  }

  /**
   * Removes the upload's row and claims its pending record (deleting it),
   * all or nothing; `where` says whose turn it is (our lease, or expired and
   * unleased). Returns what was removed, or undefined when the row did not
   * match. `slot` is the quota slot the claim freed (none once the upload
   * became a file).
   */
  async claim(id: string, where: { token: string } | { expiredAt: Date }) {
    return this.prisma
      .$transaction(async (tx) => {
        const condition = 'token' in where ? { lockToken: where.token } : { expiresAt: { lte: where.expiredAt }, ...unlocked(where.expiredAt) };
        const row = await tx.resumableUpload.delete({ where: { id, ...condition } });
        const pending = await tx.pendingObject.findUnique({ where: { storageKey: row.storageKey, reason: 'resumable' } });
        if (pending) await tx.pendingObject.delete({ where: { storageKey: row.storageKey } });
        return { row, pending: pending ?? undefined };
      })
      .catch((err: unknown) => {
        if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2025') return undefined;
        throw err;
      });
  }

  /** Puts back what claim() removed, expired, so the next sweep tries again (the store could not discard it). */
  async restore(claimed: NonNullable<Awaited<ReturnType<ResumableRecords['claim']>>>, now: Date): Promise<void> {
    const { row, pending } = claimed;
    await this.prisma.$transaction([
      this.prisma.resumableUpload.create({
        data: { ...row, storeState: row.storeState as Prisma.InputJsonValue, hashState: bytes(row.hashState), lockToken: null, lockedUntil: null, expiresAt: now },
      }),
      ...(pending ? [this.prisma.pendingObject.create({ data: pending })] : []),
    ]);
  }

  /** Ids of expired, unleased uploads (at most `limit`), oldest first. */
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
