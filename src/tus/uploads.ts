// Resumable uploads (tus, src/tus/routes.ts): an upload created once
// and written by any number of requests, on any instances, until its last
// byte is in; then it becomes a file through the intake's finish, as every
// upload does (src/intake). An upload opens there too, before its store
// state exists: the same slot, record and place as a plain upload's. Nothing of an upload that another instance needs
// lives in a process between requests: its offset, the store's state and
// the form of its SHA-256 are in the database (records.ts), its bytes in
// the object store. The running hash itself is held by the instance that
// wrote the last request (held-hashes.ts), as a speed-up only: elsewhere
// the digest is read from the completed object.
import type { Actor } from '../audit/actor.js';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../accounts/types.js';
import { AppError } from '../errors.js';
import { FileTooLarge, fileErrors, UploadEnded, uploadEnded } from '../files/errors.js';
import { cleanFilename } from '../files/filename.js';
import type { FileRecord } from '../files/record.js';
import { writeBody, type AppendInput } from './body.js';
import { digestOf, initialHashState } from './hash.js';
import { HeldHashes } from './held-hashes.js';
import { resumableErrors } from './errors.js';
import { newUploadId, type ResumableRecords, type ResumableRow } from './records.js';
import { LockTakenOver, type UploadLock, type UploadLocker } from './locker.js';
import { linkRulesOf, type UploadOptions } from '../files/upload-options.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { Intake } from '../intake/intake.js';
import type { Clock } from '../clock.js';

export interface ResumableOptions {
  /** Where every upload opens and becomes a file (its store and ledger are the uploads'), built once by the composition root. */
  intake: Intake;
  /** Seconds an unfinished upload lives after its creation or last write (Upload-Expires). */
  expirySeconds: number;
  /**
   * Seconds an upload may live in all, however recently written: the S3
   * bucket's lifecycle rule aborts a multipart upload that long after it
   * began (server.ts passes the rule in force). Absent: no such limit.
   */
  lifetimeSeconds?: number;
  /** The uploads' rows (built by the composition root, over the same ledger). */
  records: ResumableRecords;
  /** Which request may write to an upload now (its lease time is also a removal's claim time; its clock is ours). */
  locker: UploadLocker;
  /** Errors of clean-up work that must not fail the request. */
  onCleanupError: (err: unknown) => void;
  /** Awaited at each step of a removal; a rejection ends it there, with nothing undone (tests stop it as a crash would). */
  onRemoveStep?: (step: RemovalStep, id: string) => Promise<void>;
  /** Told each time an upload's SHA-256 is read back from its completed object (its running hash was not held here). */
  onDigestRead?: () => void;
  /** Uploads whose running hash this instance holds between requests, at most (default 1024; about 2 KiB of memory each). */
  heldHashes?: number;
}

/** The points of a removal (terminate, or the sweep of an expired upload) between two of its writes. */
export type RemovalStep = 'claimed' | 'discarded' | 'forgotten';

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

/**
 * The answer to a request whose body was cut (`interrupted`: what cut it)
 * after `offset` bytes of the upload were saved: our own refusal (too slow,
 * giving way, past Upload-Length) as it is, or upload_aborted for a client
 * that hung up; either way with the offset to continue from.
 */
function cutAt(interrupted: unknown, offset: number): AppError {
  if (!(interrupted instanceof AppError)) return resumableErrors.aborted(offset);
  return new AppError(interrupted.code, interrupted.message, { ...interrupted.headers, 'Upload-Offset': String(offset) });
}

export class ResumableUploads {
  private readonly records: ResumableRecords;
  /** Reservations against the plan's max_total_size (the ledger's). */
  private readonly storage: UploadLedger['storage'];
  private readonly locker: UploadLocker;
  private readonly clock: Clock;
  /** How long a request's lock holds unless renewed, and a removal's claim. */
  private readonly leaseMs: number;
  /** How long a request giving way reads on what is already in flight: a quarter of the newcomer's wait, at most 2 s. */
  private readonly settleMs: number;
  /** Running hashes of uploads whose last request ran here (hash.ts). */
  private readonly held: HeldHashes;

  constructor(private readonly options: ResumableOptions) {
    // An entry lives as long as an upload not written since: after that the upload has expired.
    this.held = new HeldHashes({ maxEntries: options.heldHashes ?? 1024, maxAgeMs: options.expirySeconds * 1000 });
    this.records = options.records;
    this.locker = options.locker;
    this.storage = options.intake.ledger.storage;
    this.clock = options.locker.options.clock;
    this.leaseMs = options.locker.options.leaseMs;
    this.settleMs = Math.min(2000, options.locker.options.takeoverMs / 4);
  }

  /** Upload-Expires after a write at `now` to an upload created at `createdAt`, never past its `deadline`. */
  private expiresAfter(now: Date, { createdAt, deadline }: { createdAt: Date; deadline?: Date }): Date {
    const { expirySeconds, lifetimeSeconds = Number.POSITIVE_INFINITY } = this.options;
    return new Date(Math.min(now.getTime() + expirySeconds * 1000, createdAt.getTime() + lifetimeSeconds * 1000, deadline?.getTime() ?? Number.POSITIVE_INFINITY));
  }

  /**
   * A new upload of `length` bytes (undefined: deferred) named by the
   * client's `rawFilename`, opened by the intake (a length over the plan's
   * max_file_size or the storage quota's room refused, a daily slot, the
   * ledger's record, `requestId`'s place) before its store state and row
   * are made. `deadline`: the upload expires then at the latest,
   * however recently written (a file request's REQUEST_UPLOAD_EXPIRY), and
   * a PATCH still flowing then is cut and the upload removed.
   */
  async create(
    caller: Caller,
    input: { length?: number; rawFilename: string; options?: UploadOptions; deadline?: Date; requestId?: string },
  ): Promise<UploadStatus> {
    const { intake } = this.options;
    const filename = cleanFilename(input.rawFilename);
    const options = input.options ?? {};
    const storageKey = await intake.open(caller, { size: input.length, requestId: input.requestId });
    try {
      // Kept until the upload becomes a file: the password only as its hash.
      const rules = await linkRulesOf({ maxDownloads: options.maxDownloads, password: options.password }, this.clock());
      const now = this.clock();
      const row = await this.records.create({
        id: newUploadId(),
        accountId: caller.accountId,
        storageKey,
        filename,
        length: input.length,
        storeState: await intake.store.startResumable(storageKey, { maxSize: input.length ?? this.maxSize(caller) }),
        hashState: await initialHashState(),
        expiresAt: this.expiresAfter(now, { createdAt: now, deadline: input.deadline }),
        deadline: input.deadline,
        createdAt: now,
        fileExpiresIn: options.expiresIn,
        maxDownloads: rules.maxDownloads,
        passwordHash: rules.passwordHash,
      });
      return statusOf(row);
    } catch (err) {
      // No row names the upload: its record goes, with its slot and place (a
      // store upload started meanwhile is one the sweep's walk finds unclaimed).
      await intake.abandon(storageKey);
      throw err;
    }
  }

  /**
   * The upload's state (HEAD). A request writing to it now is asked to stop
   * (newest request wins), so the offset is what it stored when it did.
   * Finishes the upload if its last request stored every byte but was cut
   * short before it became a file. `takeOver: false` (the JSON view, polled
   * for progress) reads the state without stopping the request writing it.
   */
  async status(caller: Caller, id: string, { takeOver = true } = {}): Promise<UploadStatus> {
    const now = this.clock();
    let view = await this.records.find(id, caller.accountId, now);
    if (view?.file) return statusOf(view, view.file);
    if (!view?.pending || view.expiresAt <= now) throw resumableErrors.notFound();
    if (view.locked && takeOver) {
      // Read again even when there was nothing to take over: the holder may
      // have committed and let go between our read and the takeover, and the
      // offset read before is then stale (a client sent from 0 again).
      await this.locker.takeOver(id, caller.accountId);
      view = await this.records.find(id, caller.accountId, this.clock());
      if (view?.file) return statusOf(view, view.file);
      if (!view?.pending) throw resumableErrors.notFound();
    }
    if (view.offset === view.length && !view.locked) {
      const lock = await this.locker.lock(id, caller.accountId, view.offset);
      if (lock) {
        try {
          return statusOf(lock.row, await this.finishOrRemove(lock.row, lock.token, caller.actor));
        } finally {
          await lock.unlock();
        }
      }
    }
    return statusOf(view);
  }

  /**
   * The account's unfinished uploads (not yet files, not expired), newest
   * first, a page at a time: what holds its daily slots and storage room, so
   * the owner can resume or terminate them.
   */
  async unfinished(caller: Caller, page: number, limit: number): Promise<{ uploads: UploadStatus[]; total: number }> {
    const { rows, total } = await this.records.unfinished(caller.accountId, this.clock(), page, limit);
    return { uploads: rows.map((row) => statusOf(row)), total };
  }

  /** The largest upload `caller` may make (Tus-Max-Size): the intake's, as for every upload. */
  maxSize(caller: Caller): number {
    return this.options.intake.maxSize(caller);
  }

  /** Writes `input.body` at `input.offset` (PATCH). */
  async append(caller: Caller, id: string, input: AppendInput): Promise<AppendOutcome> {
    const lock = await this.locker.lock(id, caller.accountId, input.offset);
    if (!lock) throw await this.whyNotLocked(caller, id, input.offset);
    try {
      return await this.appendLocked(caller, lock, input);
    } finally {
      await lock.unlock();
    }
  }

  private async appendLocked(caller: Caller, lock: UploadLock, input: AppendInput): Promise<AppendOutcome> {
    const { row, token } = lock;
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

    const quota = caller.plan.maxTotalSize;
    // What the upload already holds against the quota is its own to use: at
    // least the bytes it stored, more when a request before this one ended
    // without trimming its block (a crash). Counting only the stored bytes
    // asked the quota again for room the upload itself held (issue 38).
    const held = quota === null ? row.offset : Math.max(row.offset, await this.storage.held(row.storageKey));
    // What this request reserved beyond what it keeps goes back when it ends,
    // however it ends (a failed store call, a checksum that did not match);
    // a crash leaves it to the commit or the sweep.
    let kept = row.offset;
    const deadline = this.untilDeadline(lock.signal, row.deadline);
    const written = await writeBody(this.options.intake.store, row, input, {
      length,
      limit,
      overLimit,
      // The bytes stored so far are reserved (each request trims its reservation to them when it ends).
      admit: quota === null ? undefined : this.storage.admitter(caller.accountId, row.storageKey, quota, held),
      onState: (state) => this.records.saveStoreState(row, token, state),
      held: this.held,
      // Told to stop (a newer request for this upload, or the lock could not
      // be renewed): the body ends (for a newer request, once what is in
      // flight is in); what was stored is committed below as for a client
      // that hung up, and append() unlocks. At the upload's deadline, the
      // body is cut and the upload removed below.
      stop: {
        signal: deadline.signal,
        settles: (reason) => reason instanceof LockTakenOver,
        graceMs: this.settleMs,
        error: (reason) => (reason instanceof LockTakenOver || !(reason instanceof Error) ? resumableErrors.busy() : reason),
      },
    })
      .then((result) => {
        if (!result.checksumFailed) kept = result.offset;
        return result;
      })
      .finally(async () => {
        deadline.clear();
        if (quota !== null) await this.storage.trim(row.storageKey, kept).catch(this.options.onCleanupError);
      });
    const { interrupted } = written;
    // Past the plan's size, or its file request ended (or its time through one ran out): it can never be a file.
    if (interrupted instanceof FileTooLarge || interrupted instanceof UploadEnded) {
      await this.remove(row.id, { token });
      throw interrupted;
    }
    if (written.checksumFailed) {
      // Nothing is saved: the next append from the saved state writes over these bytes.
      throw interrupted ? resumableErrors.aborted() : resumableErrors.checksumMismatch();
    }
    const finished = written.offset === length;
    const next = { ...row, offset: written.offset, length, storeState: written.state, hashState: written.hashState, expiresAt: this.expiresAfter(this.clock(), row) };
    const saved = await this.records.commit(row.id, token, { ...next, interrupted: interrupted !== undefined });
    if (!saved) throw resumableErrors.busy();
    // The row names the running hash now, and the lock is still ours: a newer request reads this row only after we unlock.
    written.hashSaved();
    if (interrupted !== undefined && !finished) throw cutAt(interrupted, written.offset);
    const file = finished ? await this.finishOrRemove(next, token, caller.actor) : undefined;
    return { status: statusOf(next, file), received: written.received, resumedAt: row.interrupted ? row.offset : undefined };
  }

  /** A request to an upload that has every byte: nothing more may come; finish it if that was cut short. */
  private async appendToComplete(caller: Caller, row: ResumableRow, token: string, input: AppendInput): Promise<AppendOutcome> {
    if ((input.bodySize ?? 0) > 0) throw resumableErrors.lengthExceeded(row.offset);
    const view = await this.records.find(row.id, caller.accountId, this.clock());
    if (view?.file || !view?.pending) {
      if (!view?.file) throw resumableErrors.notFound();
      return { status: statusOf(row, view.file), received: 0 };
    }
    return { status: statusOf(row, await this.finishOrRemove(row, token, caller.actor)), received: 0 };
  }

  /** The length this request leaves the upload with; a deferred one may be declared once, never changed. */
  private declaredLength(row: ResumableRow, declared: number | undefined): number | undefined {
    if (declared === undefined || declared === row.length) return row.length;
    if (row.length !== undefined) throw resumableErrors.lengthMismatch(`Upload-Length is already ${row.length}`);
    if (declared < row.offset) throw resumableErrors.lengthMismatch(`Upload-Length is below the ${row.offset} bytes already stored`);
    return declared;
  }

  /**
   * `lock` as a signal that also aborts at `deadline` (with UploadEnded:
   * the upload's time ran out); clear() stops its timer.
   */
  private untilDeadline(lock: AbortSignal, deadline: Date | undefined): { signal: AbortSignal; clear(): void } {
    const wait = deadline ? Math.max(0, deadline.getTime() - this.clock().getTime()) : Number.POSITIVE_INFINITY;
    // setTimeout holds at most 2^31-1 ms (24.8 days): a later deadline is left to the expiry a lock checks.
    if (wait >= 2 ** 31) return { signal: lock, clear: () => {} };
    const expired = new AbortController();
    const timer = setTimeout(() => expired.abort(uploadEnded.expired()), wait).unref();
    return { signal: AbortSignal.any([lock, expired.signal]), clear: () => clearTimeout(timer) };
  }

  /**
   * finish(), and if the commit refused the upload for good (its file
   * request was closed or expired meanwhile), removes it under the lock
   * `token`: its bytes and records go, with its slot and reservation.
   */
  private async finishOrRemove(row: ResumableRow, token: string, actor: Actor | undefined): Promise<FileRecord> {
    try {
      return await this.finish(row, actor);
    } catch (err) {
      if (err instanceof UploadEnded) await this.remove(row.id, { token });
      throw err;
    }
  }

  /** Makes the upload's object a file (the intake's finish, as every upload's); the caller holds its lock, and unlocks. */
  private async finish(row: ResumableRow, actor: Actor | undefined): Promise<FileRecord> {
    const { intake } = this.options;
    await intake.store.completeResumable(row.storageKey, row.storeState, row.offset);
    const sha256 = await digestOf(row, this.held, () => {
      this.options.onDigestRead?.();
      return intake.store.get(row.storageKey);
    });
    const file = await intake.finish({
      accountId: row.accountId,
      filename: row.filename,
      size: row.offset,
      sha256,
      storageKey: row.storageKey,
      expiresIn: row.fileExpiresIn,
      primaryLink: { maxDownloads: row.maxDownloads, passwordHash: row.passwordHash },
      actor,
      now: this.clock(),
    });
    this.held.drop(row.id);
    return file;
  }

  private async whyNotLocked(caller: Caller, id: string, offset: number): Promise<AppError> {
    const now = this.clock();
    const view = await this.records.find(id, caller.accountId, now);
    if (!view || !(view.pending || view.file) || (!view.file && view.expiresAt <= now)) return resumableErrors.notFound();
    if (view.offset !== offset) return resumableErrors.offsetMismatch(view.offset);
    return resumableErrors.busy();
  }

  /** Terminates an unfinished upload (DELETE): its bytes are removed and its daily slot comes back. */
  async terminate(caller: Caller, id: string): Promise<void> {
    const lock = await this.locker.lock(id, caller.accountId);
    try {
      const now = this.clock();
      const view = await this.records.find(id, caller.accountId, now);
      if (!lock) {
        if (view?.file) throw resumableErrors.complete();
        if (view?.pending && view.locked && view.expiresAt > now) throw resumableErrors.busy();
        throw resumableErrors.notFound();
      }
      if (view?.file || !view?.pending) throw view?.file ? resumableErrors.complete() : resumableErrors.notFound();
      // The removal puts a claim of its own on the row; unlocking then changes nothing there.
      await this.remove(id, { token: lock.token });
    } finally {
      await lock?.unlock();
    }
  }

  /**
   * Removes an upload: claims its records, discards its bytes, then forgets
   * the records and gives its slot back (once: only the removal that
   * forgets the pending record does). A removal that stops anywhere (a
   * crash) leaves the records of whatever the store may still hold, and the
   * sweep finishes it once the claim ran out (a lease's time). If the store
   * fails, the claim is let go at once, the upload expired, for the sweeper.
   * An upload that became a file only loses its row; the file stays.
   */
  async remove(id: string, where: { token: string } | { expiredAt: Date }): Promise<'removed' | 'forgotten' | 'failed' | undefined> {
    const { intake: { store }, onCleanupError, onRemoveStep: step = async () => {} } = this.options;
    const now = this.clock();
    const claimed = await this.records.claim(id, where, { token: randomUUID(), now, until: new Date(now.getTime() + this.leaseMs) });
    if (!claimed) return undefined;
    this.held.drop(id);
    if (!claimed.pending) return 'forgotten';
    await step('claimed', id);
    try {
      await store.discardResumable(claimed.row.storageKey, claimed.row.storeState as never);
    } catch (err) {
      onCleanupError(err);
      await this.records.letGo(claimed).catch(onCleanupError);
      return 'failed';
    }
    await step('discarded', id);
    // Forgetting the record gives back its slot and its reservation against
    // the storage quota in the same statement. Another removal took over a
    // claim that ran out: then the record is its to forget.
    if (!(await this.records.forget(claimed, this.clock()))) return undefined;
    await step('forgotten', id);
    return 'removed';
  }

  /**
   * Removes uploads past Upload-Expires that no request is writing (at most
   * `limit`, oldest first), as remove() does: the sweep's pass over tus
   * uploads. Counts those whose bytes went (`removed`) and those the store
   * could not discard (`failed`, left for the next sweep).
   */
  async sweepExpired(limit: number): Promise<{ removed: number; failed: number }> {
    const now = this.clock();
    const swept = { removed: 0, failed: 0 };
    for (const id of await this.records.expired(now, limit)) {
      const outcome = await this.remove(id, { expiredAt: now });
      if (outcome === 'removed') swept.removed += 1;
      if (outcome === 'failed') swept.failed += 1;
    }
    return swept;
  }
}
