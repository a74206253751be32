import type { Caller } from '../accounts/types.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../storage/object-store.js';
import { Upload } from './upload.js';

export interface PlainUploadsOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  /** The upload ledger (daily slots, pending records, storage quota), built once by the composition root. */
  ledger: UploadLedger;
  /** Errors of clean-up work that must not fail the request (removing an object, returning a slot). */
  onCleanupError: (err: unknown) => void;
  /** How often a streaming upload touches its pending record; a minute unless a test wants it sooner. */
  heartbeatMs?: number;
  /** Seconds during which the store may still apply a write whose call was cut (STORE_LATE_WRITE_WINDOW); 0 by default. */
  lateWriteSeconds?: number;
  clock?: () => Date;
}

/** Plain uploads (POST /files/upload, multipart): one Upload per request, from its daily slot to its file row. */
export class PlainUploads {
  constructor(private readonly options: PlainUploadsOptions) {}

  /** Takes a slot of the daily upload quota (403 when none is left) and records the upload; returns it to feed. */
  async start(caller: Caller): Promise<Upload> {
    const { prisma, store, ledger, onCleanupError, heartbeatMs, lateWriteSeconds = 0, clock = () => new Date() } = this.options;
    const upload = new Upload(prisma, store, ledger, caller, onCleanupError, heartbeatMs, { lateWriteMs: lateWriteSeconds * 1000, clock });
    await ledger.openUpload(upload.key, caller.accountId, caller.plan.dailyUploads, onCleanupError);
    return upload;
  }
}
