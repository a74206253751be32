import { pipeline, type Readable } from 'node:stream';
import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../storage/object-store.js';
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

/**
 * One upload, from its quota slot to its file row. It is recorded as pending
 * before the first byte is written; the object is written next and the file
 * row last, in the same transaction that drops the pending record, so a row
 * never points at a missing object. Every other ending goes through abort(),
 * which removes the object and gives the slot back; a crash leaves the
 * pending record for the sweeper.
 */
export class Upload {
  readonly key = newStorageKey();
  /** The store's handle on the incomplete upload, once it has one. */
  private uploadId?: string;
  private receiving?: Promise<Stored>;
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
    const record = await commitFile(this.prisma, { ...stored, ...settings, accountId: this.caller.accountId, storageKey: this.key });
    this.done = true;
    return record;
  }

  /** Undoes everything the upload did. Safe to call at any point, more than once. */
  async abort(): Promise<void> {
    if (this.done) return;
    this.done = true;
    // A write still in flight could create the object after we delete it.
    await this.receiving?.catch(ignore);
    // The put has aborted its incomplete upload already, unless the store was
    // unreachable then; ask again, so the record (which holds the upload id)
    // is dropped only once the abort is confirmed, never just the delete.
    const objectGone = await this.store.discard(this.key, this.uploadId).then(
      () => true,
      (err: unknown) => {
        this.onCleanupError(err);
        return false;
      },
    );
    // Settling gives back the slot and, in the same statement, any bytes reserved against the storage quota.
    await this.ledger.settleFailedUpload(this.key, objectGone).catch(this.onCleanupError);
  }
}
