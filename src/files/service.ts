import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../storage/object-store.js';
import { Downloads, type BodyChoice, type DownloadCredentials, type OpenedDownload } from './download.js';
import { fileErrors, linkErrors } from './errors.js';
import { removeFileRow } from './file-rows.js';
import { FileLinks, type LinkRecord, type Revocation } from './links.js';
import type { LiveDownloads } from './live-downloads.js';
import { linkRulesOf, type UploadOptions } from './upload-options.js';
import { LISTED, toFileListing, type FileListing, type FileRecord } from './record.js';

export interface FileServiceOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  /** The upload ledger (daily slots, pending records, storage quota), built once by the composition root. */
  ledger: UploadLedger;
  /** Called with errors of clean-up work that must not fail the request (removing an object). */
  onCleanupError: (err: unknown) => void;
  /** Downloads in flight, ended when their link is revoked or their file deleted (on every instance). */
  live?: LiveDownloads;
}

const LINK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];

export class FileService {
  /** The files' public links (links.ts). */
  readonly links: FileLinks;
  private readonly downloads: Downloads;

  constructor(private readonly options: FileServiceOptions) {
    this.links = new FileLinks(options.prisma);
    this.downloads = new Downloads(this.links, options.store, undefined, options.live);
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
    const { prisma, store, ledger, onCleanupError } = this.options;
    const storageKey = await removeFileRow(prisma, accountId, fileId);
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
   * A download through the link of `token` (download.ts): the link's rules
   * checked, the body chosen by `choose` once the file is known, opened, and
   * what to count when the response ends. Undefined for no such link.
   */
  openDownload(token: string, choose: (file: FileRecord) => BodyChoice, credentials?: DownloadCredentials): Promise<OpenedDownload | undefined> {
    return this.downloads.open(token, choose, credentials);
  }

  /** The links of the account's file, the primary first (404 file_not_found for no such file). */
  async listLinks(accountId: number, fileId: number): Promise<LinkRecord[]> {
    const links = await this.links.list(accountId, fileId);
    if (!links) throw fileErrors.notFound();
    return links;
  }

  /** A new link to the account's file with `options` (expires_in from now; the password hashed). */
  async createLink(accountId: number, fileId: number, options: UploadOptions): Promise<LinkRecord> {
    const now = new Date();
    const link = await this.links.create(accountId, fileId, await linkRulesOf(options, now), now);
    if (!link) throw fileErrors.notFound();
    return link;
  }

  /**
   * Revokes a link of the account's file: its URL answers 404 at once, on
   * every instance (links are read from the database on every download,
   * never cached). Revoking the primary link rotates it (links.ts).
   */
  async revokeLink(accountId: number, fileId: number, linkId: string): Promise<Revocation> {
    // Link ids are UUIDs; anything else names no link, and is not worth a query.
    const outcome = LINK_ID.test(linkId) ? await this.links.revoke(accountId, fileId, linkId) : undefined;
    if (!outcome) throw linkErrors.notFound();
    // Its downloads in flight end too, on every instance (live-downloads.ts).
    await this.options.live?.announce({ link: linkId });
    return outcome;
  }

  /** The account's counters: one row by key (findUnique, so concurrent requests share a query). */
  async stats(accountId: number): Promise<{ totalFiles: number; totalSize: number }> {
    const row = await this.options.prisma.account.findUnique({ where: { id: accountId }, select: { fileCount: true, totalBytes: true } });
    return { totalFiles: row?.fileCount ?? 0, totalSize: Number(row?.totalBytes ?? 0n) };
  }
}
