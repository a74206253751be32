// The intake: one upload's life, whatever carries its bytes. A transport
// (multipart in src/uploads, tus in src/tus) opens an upload here before it
// reads a byte, writes the bytes to the store itself, and ends here: finish()
// makes the object a file, end() or abandon() gives back everything the
// upload held. The rules an upload meets are the same on every transport:
//
//   open     the declared size against the plan's max_file_size and the
//            storage quota's room, a daily slot, the ledger's record, and a
//            file request's place: all before the first byte
//   reserve  while bytes flow (the ledger's storage quota, which the
//            transport asks as it writes)
//   finish   one statement: the record becomes the file row, its primary
//            link, its events and audit row (finish.ts)
//   end      a failed upload gives back its slot, reservation and place at
//            once; its record stays until the store confirms the clean-up
//   abandon  nothing reached the store: the record goes with what it held
//
// The SQL on the ledger's tables is the ledger's (src/ledger); the intake
// and the ledger are the only modules that run it.
import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import { StorageQuotaExceeded } from '../ledger/storage-quota.js';
import type { ObjectStore } from '../storage/object-store.js';
import { fileErrors } from '../files/errors.js';
import { newStorageKey, type FileRecord } from '../files/record.js';
import { commitFile, type StoredFile } from './finish.js';
import { takePlace } from './places.js';
import { systemClock, type Clock } from '../clock.js';

export type { StoredFile } from './finish.js';

export interface IntakeOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  ledger: UploadLedger;
  /** Errors of clean-up work that must not fail the request (giving back a slot, removing an object). */
  onCleanupError: (err: unknown) => void;
  /** Seconds during which the store may still apply a write whose call was cut (STORE_LATE_WRITE_WINDOW); 0 by default. */
  lateWriteSeconds?: number;
  /** The time uploads open, end and become files at (the composition root's clock). */
  clock?: Clock;
}

/** What an upload asks for when it opens. */
export interface Opening {
  /** Bytes the client declared (tus's Upload-Length); unknown for a multipart body. */
  size?: number;
  /** The file request the upload comes through: it takes one of its places. */
  requestId?: string;
  /**
   * Reserve the whole declared size against the storage quota now (413 when
   * it does not fit), for a transport that never asks as bytes flow: an
   * upload straight to the store (src/direct/).
   */
  reserveAll?: boolean;
}

/** How a written upload ended badly, for end(). */
export interface Ending {
  /** The store's handle on the incomplete upload, if it had one. */
  uploadId?: string;
  /** The store failed under the write (no answer, or a failure): a write may still be applied later. */
  storeFailed: boolean;
}

/**
 * The largest file `caller` may upload into `store`. Plans are checked
 * against the store when set, but one set before a move to a smaller store
 * must still be refused before the store is.
 */
export const maxUploadSize = (caller: Caller, store: ObjectStore) => Math.min(caller.plan.maxFileSize, store.maxObjectSize);

export class Intake {
  readonly ledger: UploadLedger;
  readonly store: ObjectStore;
  private readonly clock: Clock;

  constructor(private readonly options: IntakeOptions) {
    this.ledger = options.ledger;
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
  }

  /** The largest upload `caller` may make. */
  maxSize(caller: Caller): number {
    return maxUploadSize(caller, this.store);
  }

  /**
   * Opens an upload for `caller` and returns its storage key: refuses a
   * declared size over the plan (403) or past the storage quota's room
   * (413), takes a daily slot (403 when none is left), records the upload
   * in the ledger, takes its file request's place (404, 410), and with
   * `reserveAll` reserves the declared size (413). On a refusal nothing stays
   * taken.
   */
  async open(caller: Caller, opening: Opening = {}): Promise<string> {
    const { ledger, onCleanupError, prisma } = this.options;
    const { size, requestId } = opening;
    const max = this.maxSize(caller);
    if (size !== undefined && size > max) throw fileErrors.tooLarge(max);
    const quota = caller.plan.maxTotalSize;
    if (quota !== null && size !== undefined && size > (await ledger.storage.room(caller.accountId, quota))) throw new StorageQuotaExceeded(quota);
    const storageKey = newStorageKey();
    await ledger.openUpload(storageKey, caller.accountId, caller.plan.dailyUploads, onCleanupError);
    try {
      if (requestId !== undefined) await takePlace(prisma, requestId, storageKey, this.clock());
      if (opening.reserveAll && quota !== null && size !== undefined && size > 0) {
        if ((await ledger.storage.reserve(caller.accountId, storageKey, size, quota, false)) === 0) throw new StorageQuotaExceeded(quota);
      }
    } catch (err) {
      await this.abandon(storageKey);
      throw err;
    }
    return storageKey;
  }

  /** Makes the stored object a file: the one point where an upload becomes one (finish.ts). */
  finish(file: StoredFile): Promise<FileRecord> {
    return commitFile(this.options.prisma, { now: this.clock(), ...file });
  }

  /** An upload refused before any byte of it reached the store: its record goes, with its slot, reservation and place. */
  async abandon(storageKey: string): Promise<void> {
    await this.ledger.forgetUnwritten(storageKey).catch(this.options.onCleanupError);
  }

  /**
   * A written upload that will not become a file: its slot, reserved bytes
   * and file request's place come back now, in the statement that marks its
   * record ended, not once the store answers the clean-up (which, with the
   * store down, may be a while). A write the store did not answer may still
   * be applied later: the record then names the object until the window for
   * that has passed, and the sweep deletes it once more then.
   */
  async end(storageKey: string, ending: Ending): Promise<void> {
    const { onCleanupError, lateWriteSeconds = 0 } = this.options;
    const now = this.clock();
    const lateUntil = ending.storeFailed && lateWriteSeconds > 0 ? new Date(now.getTime() + lateWriteSeconds * 1000) : undefined;
    await this.ledger.endUpload(storageKey, { now, lateUntil }).catch(onCleanupError);
    // The put has aborted its incomplete upload already, unless the store was
    // unreachable then; ask again, so the record (which holds the upload id)
    // is dropped only once the abort is confirmed, never just the delete.
    // When this fails, the sweep retries from the record.
    const removed = await this.store.discard(storageKey, ending.uploadId).then(
      () => true,
      (err: unknown) => {
        onCleanupError(err);
        return false;
      },
    );
    if (removed) await this.ledger.cleanedUp(storageKey, this.clock()).catch(onCleanupError);
  }
}
