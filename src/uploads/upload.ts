import { pipeline, type Readable } from 'node:stream';
import type { Caller } from '../accounts/types.js';
import { ObjectStoreError } from '../storage/object-store.js';
import { ByteCounter } from './byte-counter.js';
import { fileErrors } from '../files/errors.js';
import { cleanFilename } from '../files/filename.js';
import type { FileRecord } from '../files/record.js';
import { linkRulesOf, type UploadOptions } from '../files/upload-options.js';
import type { Intake, StoredFile } from '../intake/intake.js';

interface Stored {
  filename: string;
  size: number;
  sha256: string;
}

const ignore = () => {};

/** How often a streaming upload tells the sweeper it is alive (PlainUploadsOptions.heartbeatMs overrides it, for tests). */
export const HEARTBEAT_MS = 60_000;

/**
 * One multipart upload, the bytes of an upload the intake opened (its slot,
 * record and place are taken before the first byte): the object is written
 * here, and the file row last, by the intake's finish, in the statement that
 * drops the pending record, so a row never points at a missing object.
 * Every other ending goes through abort(), which gives the slot (and place,
 * and reserved bytes) back and removes the object; a crash leaves the
 * pending record for the sweeper.
 */
export class Upload {
  /** The store's handle on the incomplete upload, once it has one. */
  private uploadId?: string;
  private receiving?: Promise<Stored>;
  /** The store failed under the put (no answer, or a failure): a write may have reached it and be applied later. */
  private storeFailed = false;
  /** The file's expiry and its primary link's rules, from the upload's options (the password hashed while the body streams). */
  private settings?: Promise<Pick<StoredFile, 'expiresIn' | 'primaryLink'>>;
  private done = false;

  constructor(
    private readonly intake: Intake,
    /** The upload's storage key, from Intake.open. */
    readonly key: string,
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
    const { ledger, store } = this.intake;
    const limit = this.intake.maxSize(this.caller);
    const counter = new ByteCounter(limit, () => fileErrors.tooLarge(limit));
    const heartbeat = setInterval(() => ledger.touch(this.key).catch(this.onCleanupError), this.heartbeatMs).unref();
    try {
      // The callback form only wires the two streams: errors on either side
      // destroy both and reach the store's put, which cleans up and rejects.
      // With a storage quota, no byte reaches the store before it is reserved (src/ledger/storage-quota.ts).
      const quota = this.caller.plan.maxTotalSize;
      const source = quota === null ? pipeline(body, counter, ignore) : pipeline(body, counter, ledger.storage.gate(this.caller.accountId, this.key, quota), ignore);
      await store.put(this.key, source, {
        maxSize: limit,
        onStarted: (uploadId) => {
          this.uploadId = uploadId;
          return ledger.setUploadId(this.key, uploadId);
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

  /** Makes the stored object a file (the intake's finish); if that fails, the caller's abort() removes the object. */
  async commit(): Promise<FileRecord> {
    if (!this.receiving) throw new Error('commit() before receive()');
    const stored = await this.receiving;
    const settings = await this.settings;
    const record = await this.intake.finish({ ...stored, ...settings, accountId: this.caller.accountId, storageKey: this.key, actor: this.caller.actor });
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
    if (!this.receiving) return this.intake.abandon(this.key);
    await this.intake.end(this.key, { uploadId: this.uploadId, storeFailed: this.storeFailed });
  }
}
