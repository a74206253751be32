// Resumable uploads (tus, src/http/tus-routes.ts): an upload created once
// and written by any number of requests, on any instances, until its last
// byte is in; then it becomes a file through the same commit as a plain
// upload (file-rows.ts). Nothing of an upload lives in a process between
// requests: its offset, the store's state and the SHA-256 so far are in the
// database (resumable-records.ts), its bytes in the object store.
import { randomUUID } from 'node:crypto';
import type { Caller } from '../accounts/service.js';
import { AppError } from '../errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import { fileErrors } from './errors.js';
import { commitFile } from './file-rows.js';
import { cleanFilename } from './filename.js';
import { utcDay, type UploadQuota } from './quota.js';
import { newStorageKey, type FileRecord } from './record.js';
import { hasher, writeBody, type AppendInput } from './resumable-body.js';
import { resumableErrors } from './resumable-errors.js';
import { newUploadId, ResumableRecords, type ResumableRow } from './resumable-records.js';
import { maxUploadSize } from './upload.js';

export interface ResumableOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  quota: UploadQuota;
  /** Seconds an unfinished upload lives after its creation or last write (Upload-Expires). */
  expirySeconds: number;
  /**
   * Seconds an upload may live in all, however recently written: the S3
   * bucket's lifecycle rule aborts a multipart upload that long after it
   * began (server.ts passes the rule in force). Absent: no such limit.
   */
  lifetimeSeconds?: number;
  /** How long a request's lease on an upload holds unless renewed (every third of it, while the request runs). */
  leaseMs?: number;
  clock?: () => Date;
  /** Errors of clean-up work that must not fail the request. */
  onCleanupError: (err: unknown) => void;
}

/** What a client is told about an upload. */
export interface UploadStatus {
  id: string;
  filename: string;
  offset: number;
  /** Undefined while deferred. */
  length?: number;
  expiresAt: Date;
  /** Present once the upload is a file. */
  file?: FileRecord;
}

export interface AppendOutcome {
  status: UploadStatus;
  /** Bytes this request stored. */
  received: number;
  /** The offset this request continued from, when the request before it was cut short. */
  resumedAt?: number;
}

const statusOf = (row: ResumableRow, file?: FileRecord): UploadStatus => ({
  id: row.id,
  filename: row.filename,
  offset: row.offset,
  length: row.length,
  expiresAt: row.expiresAt,
  file,
});

export class ResumableUploads {
  readonly records: ResumableRecords;
  private readonly leaseMs: number;
  private readonly clock: () => Date;

  constructor(private readonly options: ResumableOptions) {
    this.records = new ResumableRecords(options.prisma);
    this.leaseMs = options.leaseMs ?? 30_000;
    this.clock = options.clock ?? (() => new Date());
  }

  private later(ms: number): Date {
    return new Date(this.clock().getTime() + ms);
  }

  /** Upload-Expires after a write at `now` to an upload created at `createdAt`. */
  private expiresAfter(now: Date, createdAt: Date): Date {
    const { expirySeconds, lifetimeSeconds = Number.POSITIVE_INFINITY } = this.options;
    return new Date(Math.min(now.getTime() + expirySeconds * 1000, createdAt.getTime() + lifetimeSeconds * 1000));
  }

  /**
   * A new upload of `length` bytes (undefined: deferred) named by the
   * client's `rawFilename`. Limits come first: a length over the plan's
   * max_file_size is refused (403) before a daily slot is taken (403 when
   * none is left).
   */
  async create(caller: Caller, input: { length?: number; rawFilename: string }): Promise<UploadStatus> {
    const { store, quota, onCleanupError } = this.options;
    const filename = cleanFilename(input.rawFilename);
    const max = this.maxSize(caller);
    if (input.length !== undefined && input.length > max) throw fileErrors.tooLarge(max);
    const day = await quota.take(caller.accountId, caller.plan.dailyUploads);
    if (!day) throw fileErrors.dailyUploadLimit(caller.plan.dailyUploads);
    try {
      const storageKey = newStorageKey();
      const now = this.clock();
      const row = await this.records.create({
        id: newUploadId(),
        accountId: caller.accountId,
        storageKey,
        filename,
        length: input.length,
        storeState: await store.startResumable(storageKey, { maxSize: input.length ?? max }),
        hashState: (await hasher()).save(),
        quotaDay: day,
        expiresAt: this.expiresAfter(now, now),
        createdAt: now,
      });
      return statusOf(row);
    } catch (err) {
      await quota.release(caller.accountId, day).catch(onCleanupError);
      throw err;
    }
  }

  /** The upload's state (HEAD); finishes it if its last request stored every byte but was cut short before it became a file. */
  async status(caller: Caller, id: string): Promise<UploadStatus> {
    const now = this.clock();
    const view = await this.records.find(id, caller.accountId, now);
    if (view?.file) return statusOf(view, view.file);
    if (!view?.pending || view.expiresAt <= now) throw resumableErrors.notFound();
    if (view.offset === view.length && !view.locked) {
      const token = randomUUID();
      const row = await this.records.lease(id, caller.accountId, token, now, this.later(this.leaseMs), view.offset);
      if (row) {
        try {
          return statusOf(row, await this.finishLeased(row, token));
        } catch (err) {
          await this.records.release(id, token).catch(this.options.onCleanupError);
          throw err;
        }
      }
    }
    return statusOf(view);
  }

  /** The largest upload `caller` may make (Tus-Max-Size): the plan's, within what the store holds, as for a plain upload. */
  maxSize(caller: Caller): number {
    return maxUploadSize(caller, this.options.store);
  }

  /** Writes `input.body` at `input.offset` (PATCH). */
  async append(caller: Caller, id: string, input: AppendInput): Promise<AppendOutcome> {
    const { records } = this;
    const token = randomUUID();
    const row = await records.lease(id, caller.accountId, token, this.clock(), this.later(this.leaseMs), input.offset);
    if (!row) throw await this.whyNotLeased(caller, id, input.offset);
    let answered = false;
    // The lease outlives a stalled client only while this process is alive
    // to renew it; if it cannot, stop: what follows could not be saved.
    const renewal = setInterval(() => {
      records.renew(id, token, this.later(this.leaseMs)).then(
        (ours) => ours || input.body.destroy(resumableErrors.busy()),
        (err: unknown) => input.body.destroy(err as Error),
      );
    }, this.leaseMs / 3).unref();
    try {
      const outcome = await this.appendLeased(caller, row, token, input);
      answered = true; // appendLeased committed, and released the lease
      return outcome;
    } finally {
      clearInterval(renewal);
      // Only this request's token is released: after a commit or a removal
      // that already ended the lease, this changes nothing.
      if (!answered) await records.release(id, token).catch(this.options.onCleanupError);
    }
  }

  private async appendLeased(caller: Caller, row: ResumableRow, token: string, input: AppendInput): Promise<AppendOutcome> {
    const max = this.maxSize(caller);
    const length = this.declaredLength(row, input.length);
    // Every byte was stored by an append that knew the length (so the store
    // has ended its upload). A length declared only now, equal to what is
    // stored, goes through the store's append like any other request: it is
    // the store's cue to send its last part.
    if (row.length !== undefined && row.offset === row.length) return this.appendToComplete(caller, row, token, input);
    const limit = (length ?? max) - row.offset;
    // Past a declared length, the request is wrong; past the plan (deferred
    // length, or one declared over it), the upload can never be a file.
    const overLimit = () => (length === undefined ? fileErrors.tooLarge(max) : resumableErrors.lengthExceeded(length));
    if (length !== undefined && length <= max && (input.bodySize ?? 0) > limit) throw resumableErrors.lengthExceeded(length);
    if ((length ?? 0) > max || (input.bodySize ?? 0) > limit) {
      await this.remove(row.id, { token });
      throw fileErrors.tooLarge(max);
    }

    const written = await writeBody(this.options.store, row, input, {
      length,
      limit,
      overLimit,
      onState: (state) => this.records.saveStoreState(row, token, state),
    });
    const { interrupted } = written;
    if (interrupted instanceof AppError && interrupted.code === 'file_too_large') {
      await this.remove(row.id, { token });
      throw interrupted;
    }
    if (written.checksumFailed) {
      // Nothing is saved: the next append from the saved state writes over these bytes.
      throw interrupted ? resumableErrors.aborted() : resumableErrors.checksumMismatch();
    }
    const finished = written.offset === length;
    const next = { ...row, offset: written.offset, length, storeState: written.state, hashState: written.hashState, expiresAt: this.expiresAfter(this.clock(), row.createdAt) };
    const saved = await this.records.commit(row.id, token, { ...next, interrupted: interrupted !== undefined, keepLease: finished });
    if (!saved) throw resumableErrors.busy();
    if (interrupted !== undefined && !finished) {
      const reason = interrupted instanceof AppError ? interrupted : resumableErrors.aborted();
      throw new AppError(reason.status, reason.code, reason.message, { ...reason.headers, 'Upload-Offset': String(written.offset) });
    }
    const file = finished ? await this.finishLeased(next, token) : undefined;
    return { status: statusOf(next, file), received: written.received, resumedAt: row.interrupted ? row.offset : undefined };
  }

  /** A request to an upload that has every byte: nothing more may come; finish it if that was cut short. */
  private async appendToComplete(caller: Caller, row: ResumableRow, token: string, input: AppendInput): Promise<AppendOutcome> {
    if ((input.bodySize ?? 0) > 0) throw resumableErrors.lengthExceeded(row.offset);
    const view = await this.records.find(row.id, caller.accountId, this.clock());
    if (view?.file || !view?.pending) {
      await this.records.release(row.id, token);
      if (!view?.file) throw resumableErrors.notFound();
      return { status: statusOf(row, view.file), received: 0 };
    }
    return { status: statusOf(row, await this.finishLeased(row, token)), received: 0 };
  }

  /** The length this request leaves the upload with; a deferred one may be declared once, never changed. */
  private declaredLength(row: ResumableRow, declared: number | undefined): number | undefined {
    if (declared === undefined || declared === row.length) return row.length;
    if (row.length !== undefined) throw resumableErrors.lengthMismatch(`Upload-Length is already ${row.length}`);
    if (declared < row.offset) throw resumableErrors.lengthMismatch(`Upload-Length is below the ${row.offset} bytes already stored`);
    return declared;
  }

  /** Makes the upload's object a file, as a plain upload's; ends the lease. */
  private async finishLeased(row: ResumableRow, token: string): Promise<FileRecord> {
    await this.options.store.completeResumable(row.storageKey, row.storeState, row.offset);
    const sha256 = (await hasher(row.hashState)).digest('hex');
    const file = await commitFile(this.options.prisma, {
      accountId: row.accountId,
      filename: row.filename,
      size: row.offset,
      sha256,
      storageKey: row.storageKey,
    });
    await this.records.release(row.id, token);
    return file;
  }

  private async whyNotLeased(caller: Caller, id: string, offset: number): Promise<AppError> {
    const now = this.clock();
    const view = await this.records.find(id, caller.accountId, now);
    if (!view || !(view.pending || view.file) || (!view.file && view.expiresAt <= now)) return resumableErrors.notFound();
    if (view.offset !== offset) return resumableErrors.offsetMismatch(view.offset);
    return resumableErrors.busy();
  }

  /** Terminates an unfinished upload (DELETE): its bytes are removed and its daily slot comes back. */
  async terminate(caller: Caller, id: string): Promise<void> {
    const token = randomUUID();
    const now = this.clock();
    const row = await this.records.lease(id, caller.accountId, token, now, this.later(this.leaseMs));
    const view = await this.records.find(id, caller.accountId, now);
    if (!row) {
      if (view?.file) throw resumableErrors.complete();
      if (view?.pending && view.locked && view.expiresAt > now) throw resumableErrors.busy();
      throw resumableErrors.notFound();
    }
    if (view?.file || !view?.pending) {
      await this.records.release(id, token);
      throw view?.file ? resumableErrors.complete() : resumableErrors.notFound();
    }
    await this.remove(id, { token });
  }

  /**
   * Removes an upload: claims its records, discards its bytes and gives its
   * slot back (once: only the claim that removed the pending record does).
   * If the store fails, the records come back expired, for the sweeper.
   * An upload that became a file only loses its row; the file stays.
   */
  async remove(id: string, where: { token: string } | { expiredAt: Date }): Promise<'removed' | 'forgotten' | 'failed' | undefined> {
    const { store, quota, onCleanupError } = this.options;
    const claimed = await this.records.claim(id, where);
    if (!claimed) return undefined;
    if (!claimed.pending) return 'forgotten';
    try {
      await store.discardResumable(claimed.row.storageKey, claimed.row.storeState as never);
    } catch (err) {
      onCleanupError(err);
      await this.records.restore(claimed, this.clock()).catch(onCleanupError);
      return 'failed';
    }
    const { accountId, quotaDay } = claimed.pending;
    if (accountId && quotaDay) await quota.release(accountId, utcDay(quotaDay));
    return 'removed';
  }
}
