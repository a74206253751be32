// One plain multipart upload as every route that takes one runs it: the
// caller's account slot for the whole request, the body watched for its
// minimum rate, the file streamed into the store, then the commit; any
// failure aborts the upload (its object and record go). The routes differ
// only in the options a client may set and in what they answer.
import type { Caller } from '../accounts/types.js';
import { fileErrors } from '../files/errors.js';
import type { FileRecord } from '../files/record.js';
import type { UploadOptions } from '../files/upload-options.js';
import { enterUpload, type ConcurrencySlots } from '../limits/concurrent-uploads.js';
import type { UploadGate } from '../limits/upload-gate.js';
import type { Metrics } from '../metrics.js';
import type { PlainUploads } from './service.js';
import { watchBodyRate, type BodyRateOptions } from '../http/body-rate.js';
import { receiveFile, type Fields } from './multipart.js';
import type { IncomingMessage } from 'node:http';

export interface PlainUploadDeps {
  uploads: PlainUploads;
  uploadGate: UploadGate;
  concurrencySlots: ConcurrencySlots;
  bodyRate: BodyRateOptions;
  metrics?: Metrics;
}

export interface PlainUploadSteps {
  /** The upload's options from the form's fields that came before the file. */
  options(fields: Fields): UploadOptions;
  /** The file request the upload comes through: the intake takes its place before a byte of the body is read. */
  requestId?: string;
  /** Aborts when the upload must stop (its file request was closed): the body is cut, with the signal's reason as the answer. */
  stop?: AbortSignal;
}

/** Receives `req`'s file for `caller` and commits it; throws (having aborted the upload) on any refusal or failure. */
export async function receivePlainUpload(req: IncomingMessage, caller: Caller, deps: PlainUploadDeps, steps: PlainUploadSteps): Promise<FileRecord> {
  const { uploads, bodyRate, metrics } = deps;
  const leave = await enterUpload(deps.uploadGate, deps.concurrencySlots, caller);
  try {
    const upload = await uploads.start(caller, steps.requestId);
    const cut = new AbortController();
    const watching = watchBodyRate(req, bodyRate, () => cut.abort(fileErrors.tooSlow(bodyRate.minRate, bodyRate.windowSeconds)));
    const stop = () => cut.abort(steps.stop!.reason);
    if (steps.stop?.aborted) stop();
    else steps.stop?.addEventListener('abort', stop, { once: true });
    const unwatch = () => {
      watching();
      steps.stop?.removeEventListener('abort', stop);
    };
    try {
      // Cut while the upload opened: receiveFile hears only of cuts to come.
      cut.signal.throwIfAborted();
      await receiveFile(req, (filename, stream, fields) => upload.receive(filename, stream, steps.options(fields)), cut.signal);
      unwatch();
      const file = await upload.commit();
      metrics?.uploadedBytes.inc(file.size);
      return file;
    } catch (err) {
      unwatch();
      await upload.abort();
      throw err;
    }
  } finally {
    leave();
  }
}
