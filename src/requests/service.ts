// File requests (issue 45): the owner's side (create, list, get, close) and
// the outsider's way in (resolve a token to the request and the owner).
// Uploads through a request are the owner's uploads: the routes call the
// plain and tus transports with the owner's caller (narrowed by forOwner)
// and the request's id, and the intake takes a place for each
// (src/intake/places.ts).
import { auditRow, SYSTEM, type Actor } from '../audit/actor.js';
import { randomBytes } from 'node:crypto';
import { toPlan } from '../accounts/plans.js';
import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import { hashPassword } from '../links/link-password.js';
import { LISTED, toFileListing, type FileListing } from '../files/record.js';
import { heldByRequests, isUploadOf, lapseRequestUploads, settleRequestUploads } from '../ledger/request-uploads.js';
import { requestErrors } from './errors.js';
import type { LiveRequestUploads } from './live-uploads.js';
import { systemClock, type Clock } from '../clock.js';
import type { AuthState } from '../http/auth.js';

/** What a /r/{token} route knows once the link's guard let it through: the owner as the caller (AuthState), and the request the link opened. */
export interface RequestLinkState extends AuthState {
  fileRequest: FileRequest;
}

/**
 * What a request made without limits gets (issue 50): an outsider holding
 * its link could otherwise hold every one of the owner's daily uploads and
 * all of the storage, for ever. The owner asks for more by saying so:
 * a larger number, or null for none.
 */
export const REQUEST_DEFAULTS = {
  maxFiles: 10,
  /** Seconds: 7 days. */
  expiresIn: 7 * 86_400,
} as const;

export interface FileRequest {
  id: string;
  accountId: number;
  token: string;
  title: string | null;
  maxFiles: number | null;
  maxFileSize: number | null;
  expiresAt: Date | null;
  hasPassword: boolean;
  closedAt: Date | null;
  createdAt: Date;
  /** Files received and still in the account. */
  filesReceived: number;
  /** Uploads through it in progress (each holds a place, a daily slot and its bytes until it ends). */
  uploadsInProgress: number;
  /** Bytes they hold: reserved against the storage quota, or stored so far by a tus upload. */
  bytesHeld: number;
}

export interface NewFileRequest {
  title?: string;
  /** null: no limit; absent: REQUEST_DEFAULTS.maxFiles. */
  maxFiles?: number | null;
  maxFileSize?: number;
  /** Seconds from now; null: never; absent: REQUEST_DEFAULTS.expiresIn. */
  expiresIn?: number | null;
  password?: string;
}

/** The request's id in the API: "req_" and 96 random bits, telling nothing of its token. */
const newRequestId = () => `req_${randomBytes(12).toString('base64url')}`;
/** The upload link's secret: 128 random bits, as a download link's token. */
const newRequestToken = () => randomBytes(16).toString('base64url');
const REQUEST_ID = /^req_[A-Za-z0-9_-]{16}$/;
const TOKEN = /^[A-Za-z0-9_-]{22}$/;

type Row = {
  id: string;
  accountId: number;
  token: string;
  title: string | null;
  maxFiles: number | null;
  maxFileSize: bigint | null;
  expiresAt: Date | null;
  passwordHash: string | null;
  closedAt: Date | null;
  createdAt: Date;
  _count?: { files: number };
};

const NOTHING_HELD = { uploads: 0, bytes: 0 };

const toRequest = (row: Row, held = NOTHING_HELD): FileRequest => ({
  id: row.id,
  accountId: row.accountId,
  token: row.token,
  title: row.title,
  maxFiles: row.maxFiles,
  maxFileSize: row.maxFileSize === null ? null : Number(row.maxFileSize),
  expiresAt: row.expiresAt,
  hasPassword: row.passwordHash !== null,
  closedAt: row.closedAt,
  createdAt: row.createdAt,
  filesReceived: row._count?.files ?? 0,
  uploadsInProgress: held.uploads,
  bytesHeld: held.bytes,
});

const withCount = { _count: { select: { files: true } } } as const;

/** An open request an outsider reached, and its owner as the caller of the uploads through it. */
export interface OpenRequest {
  request: FileRequest;
  /** The owner with the plan's limits, max_file_size narrowed to the request's (forOwner). */
  owner: Caller;
  passwordHash: string | null;
}

export class FileRequests {
  constructor(
    private readonly prisma: PrismaClient,
    /** Uploads in flight through requests: a close cuts those through it, on every instance. Absent: none are tracked (tests of the service alone). */
    private readonly live?: LiveRequestUploads,
    /** The time requests and their uploads expire by (the composition root's clock). */
    readonly clock: Clock = systemClock,
  ) {}

  async create(accountId: number, input: NewFileRequest, now = this.clock(), actor: Actor = SYSTEM): Promise<FileRequest> {
    const maxFiles = input.maxFiles === undefined ? REQUEST_DEFAULTS.maxFiles : input.maxFiles;
    const expiresIn = input.expiresIn === undefined ? REQUEST_DEFAULTS.expiresIn : input.expiresIn;
    const id = newRequestId();
    const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
    const [row] = await this.prisma.$transaction([this.prisma.fileRequest.create({
      data: {
        id,
        accountId,
        token: newRequestToken(),
        title: input.title ?? null,
        maxFiles,
        maxFileSize: input.maxFileSize === undefined ? null : BigInt(input.maxFileSize),
        expiresAt: expiresIn === null ? null : new Date(now.getTime() + expiresIn * 1000),
        passwordHash,
        createdAt: now,
      },
      include: withCount,
    }), this.prisma.auditEvent.create({ data: auditRow(accountId, 'request.opened', id, actor, now) })]);
    return toRequest(row);
  }

  /** The account's open requests, newest first. */
  async list(accountId: number, page: number, limit: number): Promise<{ requests: FileRequest[]; total: number }> {
    const where = { accountId, closedAt: null };
    const [total, rows] = await Promise.all([
      this.prisma.fileRequest.count({ where }),
      this.prisma.fileRequest.findMany({ where, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], skip: (page - 1) * limit, take: limit, include: withCount }),
    ]);
    const held = await heldByRequests(this.prisma, rows.map((row) => row.id));
    return { total, requests: rows.map((row) => toRequest(row, held.get(row.id))) };
  }

  /** The account's open request with the files it received, newest first (at most `maxFiles`). */
  async get(accountId: number, id: string, maxFiles = 1000): Promise<{ request: FileRequest; files: FileListing[] }> {
    if (!REQUEST_ID.test(id)) throw requestErrors.notFound();
    const row = await this.prisma.fileRequest.findFirst({ where: { id, accountId, closedAt: null }, include: withCount });
    if (!row) throw requestErrors.notFound();
    const [files, held] = await Promise.all([
      this.prisma.file.findMany({ where: { requestId: id, accountId }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: maxFiles, select: LISTED }),
      heldByRequests(this.prisma, [id]),
    ]);
    return { request: toRequest(row, held.get(id)), files: files.map(toFileListing) };
  }

  /**
   * Closes the account's request: its link answers 404 from now on; files
   * received stay. Its uploads in progress end with it: in one transaction
   * the request is marked closed (its row locked, so no place is taken
   * meanwhile) and one statement gives back every daily slot and reserved
   * byte they held and makes their tus uploads expire; then those in flight
   * are cut, here and on the other instances (live-uploads.ts), and the
   * sweep removes their bytes. Returns how many uploads were ended.
   */
  async close(accountId: number, id: string, now = this.clock(), actor: Actor = SYSTEM): Promise<number> {
    if (!REQUEST_ID.test(id)) throw requestErrors.notFound();
    const ended = await this.prisma.$transaction(async (tx) => {
      const { count } = await tx.fileRequest.updateMany({ where: { id, accountId, closedAt: null }, data: { closedAt: now } });
      if (count === 0) return undefined;
      await tx.auditEvent.create({ data: auditRow(accountId, 'request.closed', id, actor, now) });
      return settleRequestUploads(tx, id, now);
    });
    if (ended === undefined) throw requestErrors.notFound();
    await this.live?.announce(id);
    return ended;
  }

  /**
   * Gives back what tus uploads through requests hold once their time ran
   * out (REQUEST_UPLOAD_EXPIRY, or their request's expiry), without waiting
   * for the sweep (server.ts runs it every few seconds). Returns how many.
   */
  lapseUploads(now = this.clock()): Promise<number> {
    return lapseRequestUploads(this.prisma, now);
  }

  /**
   * The open request of an upload link's token: 404 request_not_found for
   * an unknown or closed one, 410 request_expired past its expiry. Places
   * are checked when one is taken (src/intake/places.ts), not here.
   */
  async open(token: string, now = this.clock()): Promise<OpenRequest> {
    if (!TOKEN.test(token)) throw requestErrors.notFound();
    const row = await this.prisma.fileRequest.findUnique({ where: { token }, include: { ...withCount, account: { select: { plan: true } } } });
    if (!row || row.closedAt) throw requestErrors.notFound();
    if (row.expiresAt && row.expiresAt <= now) throw requestErrors.expired();
    const request = toRequest(row);
    // The plan is read here, not from the API key cache: no key is involved,
    // and a changed plan applies to the next upload through the link.
    return { request, owner: forOwner({ accountId: row.accountId, plan: toPlan(row.account.plan) }, request), passwordHash: row.passwordHash };
  }

  /** Whether tus upload `uploadId` is the request's: an outsider's link reaches no other upload of the owner. */
  ownsUpload(requestId: string, uploadId: string): Promise<boolean> {
    return isUploadOf(this.prisma, requestId, uploadId);
  }
}

/**
 * The owner's caller for an upload through `request`: the plan's limits
 * (daily uploads, storage, concurrent uploads) stay the owner's; the file
 * size is the smaller of the plan's and the request's max_file_size, so the
 * plain and tus services refuse a larger file (413/403 file_too_large) with
 * no change of their own.
 */
export function forOwner(owner: Caller, request: FileRequest): Caller {
  if (request.maxFileSize === null || request.maxFileSize >= owner.plan.maxFileSize) return owner;
  return { ...owner, plan: { ...owner.plan, maxFileSize: request.maxFileSize } };
}
