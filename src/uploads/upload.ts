import { pipeline, type Readable } from 'node:stream';
import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import { ObjectStoreError, type ObjectStore } from '../storage/object-store.js';
import { ByteCounter } from './byte-counter.js';
import { fileErrors } from '../files/errors.js';
import { cleanFilename } from '../files/filename.js';
import { commitFile, type StoredFile } from '../files/file-rows.js';
import { newStorageKey, type FileRecord } from '../files/record.js';
import { linkRulesOf, type UploadOptions } from '../files/upload-options.js';

/**
 * The largest file `caller` may upload into `store`. Plans are checked
 * against the store when set, but one set before a move to a smaller store
 * must still be refused before the store is.
 */
export const maxUploadSize = (caller: Caller, store: ObjectStore) => Math.min(caller.plan.maxFileSize, store.maxObjectSize);

interface Stored {
  filename: string;
  size: number;
  sha256: string;
}

const ignore = () => {};

/** How often a streaming upload tells the sweeper it is alive (PlainUploadsOptions.heartbeatMs overrides it, for tests). */
export const HEARTBEAT_MS = 60_000;

/** How an Upload ends when it fails (PlainUploadsOptions). */
export interface UploadEnding {
  /** Milliseconds during which the store may still apply a write whose call was cut (STORE_LATE_WRITE_WINDOW). */
  lateWriteMs: number;
  clock: () => Date;
}

/**
 * One upload, from its quota slot to its file row. It is recorded as pending
 * before the first byte is written; the object is written next and the file
 * row last, in the same transaction that drops the pending record, so a row
 * never points at a missing object. Every other ending goes through abort(),
 * which gives the slot (and place, and reserved bytes) back and removes the
 * object; a crash leaves the pending record for the sweeper.
 */
export class Upload {
  readonly key = newStorageKey();
  /** The store's handle on the incomplete upload, once it has one. */
  private uploadId?: string;
  private receiving?: Promise<Stored>;
  /** The store failed under the put (no answer, or a failure): a write may have reached it and be applied later. */
  private storeFailed = false;
  /** The file's expiry and its primary link's rules, from the upload's options (the password hashed while the body streams). */
  private settings?: Promise<Pick<StoredFile, 'expiresIn' | 'primaryLink'>>;
  private done = false;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly store: ObjectStore,
    private readonly ledger: UploadLedger,
    private readonly caller: Caller,
    private readonly onCleanupError: (err: unknown) => void,
    private readonly heartbeatMs = HEARTBEAT_MS,
    private readonly ending: UploadEnding = { lateWriteMs: 0, clock: () => new Date() },
  ) {}

  /** Streams the file into the store, counting bytes against the plan's limit; `options` apply to the file once committed. */
  receive(rawFilename: string, body: Readable, options: UploadOptions = {}): Promise<void> {
    this.settings = linkRulesOf({ maxDownloads: options.maxDownloads, password: options.password }, new Date()).then((primaryLink) => ({
      expiresIn: options.expiresIn,
      primaryLink,
    }));
    this.settings.catch(ignore); // awaited in commit(); an upload that fails first never asks
    this.receiving = this.write(rawFilename, body);
    return this.receiving.then(ignore);
  }

  private async write(rawFilename: string, body: Readable): Promise<Stored> {
    const filename = cleanFilename(rawFilename);
    const limit = maxUploadSize(this.caller, this.store);
    const counter = new ByteCounter(limit, () => fileErrors.tooLarge(limit));
    const heartbeat = setInterval(() => this.ledger.touch(this.key).catch(this.onCleanupError), this.heartbeatMs).unref();
    try {
      // The callback form only wires the two streams: errors on either side
      // destroy both and reach the store's put, which cleans up and rejects.
      // With a storage quota, no byte reaches the store before it is reserved (src/ledger/storage-quota.ts).
      const quota = this.caller.plan.maxTotalSize;
      const source = quota === null ? pipeline(body, counter, ignore) : pipeline(body, counter, this.ledger.storage.gate(this.caller.accountId, this.key, quota), ignore);
      await this.store.put(this.key, source, {
        maxSize: limit,
        onStarted: (uploadId) => {
          this.uploadId = uploadId;
          return this.ledger.setUploadId(this.key, uploadId);
        },
      });
    } catch (err) {
      // The store's own failures (a timeout among them), not the body's: a
      // request it did not answer may still be applied after our clean-up.
      if (err instanceof ObjectStoreError) this.storeFailed = true;
      throw err;
    } finally {
      clearInterval(heartbeat);
    }
    return { filename, size: counter.bytes, sha256: counter.sha256() };
  }

  /** Records the stored file (src/files/file-rows.ts); if that fails, the caller's abort() removes the object. */
  async commit(): Promise<FileRecord> {
    if (!this.receiving) throw new Error('commit() before receive()');
    const stored = await this.receiving;
    const settings = await this.settings;
    const record = await commitFile(this.prisma, { ...stored, ...settings, accountId: this.caller.accountId, storageKey: this.key, actor: this.caller.actor });
    this.done = true;
    return record;
  }

  /** Undoes everything the upload did. Safe to call at any point, more than once. */
  async abort(): Promise<void> {
    if (this.done) return;
    this.done = true;
    // A write still in flight could create the object after we delete it.
    await this.receiving?.catch(ignore);
    // Nothing reached the store (refused before the body): the record goes at once.
    if (!this.receiving) {
      await this.ledger.forgetUnwritten(this.key).catch(this.onCleanupError);
      return;
    }
    const now = this.ending.clock();
    // The upload has ended: its slot, its reserved bytes and its file
    // request's place come back now, in the statement that marks its record
    // ended, not once the store answers the clean-up (which, with the store
    // down, may be a while). A write the store did not answer may still be
    // applied later: the record then names the object until the window for
    // that has passed, and the sweep deletes it once more then.
    const lateUntil = this.storeFailed && this.ending.lateWriteMs > 0 ? new Date(now.getTime() + this.ending.lateWriteMs) : undefined;
    await this.ledger.endUpload(this.key, { now, lateUntil }).catch(this.onCleanupError);
    // The put has aborted its incomplete upload already, unless the store was
    // unreachable then; ask again, so the record (which holds the upload id)
    // is dropped only once the abort is confirmed, never just the delete.
    // When this fails, the sweep retries from the record.
    const removed = await this.store.discard(this.key, this.uploadId).then(
      () => true,
      (err: unknown) => {
        this.onCleanupError(err);
        return false;
      },
    );
    if (removed) await this.ledger.cleanedUp(this.key, this.ending.clock()).catch(this.onCleanupError);
  }
}
