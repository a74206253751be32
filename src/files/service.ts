import type { Actor } from '../audit/actor.js';
import type { Caller } from '../accounts/types.js';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../storage/object-store.js';
import { fileErrors } from './errors.js';
import { removeFileRow } from './file-rows.js';
import { LISTED, toFileListing, type FileListing } from './record.js';
import { API_FILE_COLUMNS, apiFileColumnsSql } from '../file-wire.js';

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

/** A page of the files list as JSON text (`files`, an array) and the account's total. */
export interface PageJson {
  filesJson: string;
  total: number;
}

/** The files columns a page reads: those the API's fields need (the table's names, never input). */
const LIST_COLUMNS = API_FILE_COLUMNS.join(', ');

export class FileService {
  /** Pages asked for and not yet sent to the database, by account, page, limit and URL (pageJson). */
  private readonly waitingPages = new Map<string, Promise<PageJson>>();

  constructor(private readonly options: FileServiceOptions) {
  }

  /**
   * One page of the account's files as the JSON text of the answer's
   * `files` array, written by PostgreSQL, and the total (the account's
   * counter), in one statement. The page is what clients poll; built by
   * Prisma's findMany (rows parsed, mapped, then stringified by Koa) it ran at
   * 0.41x the single-file rate, and Node's share of the work was most of it
   * (docs/performance.md, "Metadata"). Here Node passes one text column
   * through. Each item is presentFile's (src/files/present.ts) to the byte:
   * both are the API's fields of one table (src/file-wire.ts), its SQL
   * expressions here; row_to_json writes the columns in the table's order,
   * compact, escaping strings as JSON.stringify does; dates through to_char
   * as in the webhook bodies. test/files/files-list-json.test.ts holds the
   * two to the same text. The total is read beside the page rather than in
   * a transaction: at READ COMMITTED each statement takes its own snapshot.
   *
   * Requests for the same page that arrive while its statement is still
   * waiting to be sent (until the event loop's check phase, after the
   * turn's I/O) share that statement and its text, as Prisma batches
   * concurrent findUniques for GET /files/{id}. A request never joins a
   * statement already sent, so it sees every write that finished before it
   * arrived.
   */
  pageJson(accountId: number, page: number, limit: number, publicUrl: string): Promise<PageJson> {
    const key = `${accountId} ${page} ${limit} ${publicUrl}`;
    let waiting = this.waitingPages.get(key);
    if (!waiting) {
      waiting = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.waitingPages.delete(key);
        return this.readPageJson(accountId, page, limit, publicUrl);
      });
      this.waitingPages.set(key, waiting);
    }
    return waiting;
  }

  private async readPageJson(accountId: number, page: number, limit: number, publicUrl: string): Promise<PageJson> {
    const [row] = await this.options.prisma.$queryRaw<{ files: string; total: number | null }[]>`
      SELECT coalesce(string_agg(row_to_json(item)::text, ',' ORDER BY f.created_at DESC, f.id DESC), '') AS files,
             (SELECT file_count FROM accounts WHERE id = ${accountId}) AS total
      FROM (
        SELECT ${Prisma.raw(LIST_COLUMNS)}
        FROM files WHERE account_id = ${accountId}
        ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${(page - 1) * limit}
      ) f
      CROSS JOIN LATERAL (SELECT ${apiFileColumnsSql(publicUrl)}) item`;
    return { filesJson: `[${row?.files ?? ''}]`, total: row?.total ?? 0 };
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
