// `dropstream upload` for large files: tus (resumable) through tus-js-client,
// the protocol's official client. A connection that worked and then broke, or
// a server error, is retried with back-off (each retry announced on a line of
// its own), continuing from the offset the server stored; the progress line
// says it waits, then where it resumed. A server never reached is not retried:
// a wrong address or a server that is down fails at once, as a small file does.
// An upload cut short for good (Ctrl-C, retries spent on a broken network) is
// remembered (upload-store.ts) and continues when the same command runs
// again, saying where it resumed; --fresh starts over.
import { setTimeout as sleep } from 'node:timers/promises';
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { DetailedError, Upload, type UrlStorage } from 'tus-js-client';
import { CliError } from './cli-error.js';
import { createProgress, formatBytes } from './progress.js';
import { Interrupted, networkError, networkReason, onSigint, readBody, responseError, responseOf, startRequest } from './transfer-http.js';
import { uploadFingerprint, uploadStore } from './upload-store.js';

/** Files from this size on go resumable unless --plain is given. */
export const RESUMABLE_THRESHOLD = 64 * 1024 * 1024;

/** Back-off between attempts, in ms; the count starts again after any progress (tus-js-client). */
const RETRY_DELAYS = [0, 1_000, 3_000, 5_000, 10_000, 20_000, 30_000, 60_000, 60_000, 60_000];

export interface ResumableUploadOptions {
  /** Where uploads are created: the API's /api/v1/uploads. */
  endpoint: URL;
  key: string;
  path: string;
  size: number;
  showProgress: boolean;
  /** The link's rules (expires_in, max_downloads, password) as Upload-Metadata. */
  metadata: Record<string, string>;
  /** Start over: forget (and terminate) an upload of this file a previous run left. */
  fresh: boolean;
  /** Where the store of unfinished uploads is (XDG_CACHE_HOME, HOME). */
  env: NodeJS.ProcessEnv;
  /**
   * Through a file request's upload link (`<link>/uploads`) instead of the
   * API: `authorization` is the request's Basic password or none (no key is
   * sent), and the answer is the receipt, not a link (the file is the owner's).
   */
  request?: { authorization?: string };
}

/** The Authorization header of the upload's requests: the key's, or a file request's password (or none). */
const authorizationOf = (options: ResumableUploadOptions): Record<string, string> => {
  if (!options.request) return { Authorization: `Bearer ${options.key}` };
  return options.request.authorization ? { Authorization: options.request.authorization } : {};
};

/** Retried: no answer at all, 5xx, 409/423 (another request still holds the upload), 429 (rate limit). */
function retryable(err: DetailedError): boolean {
  const status = err.originalResponse?.getStatus();
  return status === undefined || status === 0 || status >= 500 || status === 409 || status === 423 || status === 429;
}


/** Why a request failed, in a few words: `connection reset`, `server answered 503`. */
export function retryReason(err: DetailedError): string {
  const status = err.originalResponse?.getStatus();
  if (status === 409 || status === 423) return `server answered ${status} (the upload is still busy with the cut request)`;
  if (status === 429) return `server answered 429 (rate limited)`;
  if (status) return `server answered ${status}`;
  return networkReason({ cause: err.causingError ?? err });
}

/** The retry announcement: `retrying in 5 s: connection reset`. */
export const retryLine = (delayMs: number, reason: string) => (delayMs > 0 ? `retrying in ${Math.ceil(delayMs / 1000)} s: ${reason}` : `retrying now: ${reason}`);

export interface SendEvents {
  onProgress(sent: number): void;
  onResumed(offset: number): void;
  /** An upload a previous run left continues at `offset`. */
  onContinued(offset: number): void;
  /** A line to print on its own (a warning). */
  onNote(line: string): void;
  /** A retry is coming after `delayMs`, for `reason`. */
  onRetry(delayMs: number, reason: string): void;
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** What is left to say about an interrupted upload: where it stands, and how to continue it. */
export const interruptedLine = (sent: number, size: number) =>
  `interrupted at ${size > 0 ? Math.floor((sent / size) * 100) : 0}% (${formatBytes(sent)} of ${formatBytes(size)}); run the same command again to resume, or add --fresh to start over`;

/**
 * Sends the file with tus; resolves with the upload's URL. An upload given
 * up on because the server refused it is terminated (it would hold a daily
 * upload slot until it expired, and nothing could continue it). One cut
 * short by Ctrl-C or by a network that stayed away is aborted without
 * terminating (its request ends at once, the server keeps what it stored),
 * and stays in the store for the next run.
 */
async function send(options: ResumableUploadOptions, { onProgress, onResumed, onContinued, onRetry, onNote }: SendEvents): Promise<string> {
  const { endpoint, key, path, size } = options;
  const store = uploadStore(options.env, onNote);
  const fingerprint = await uploadFingerprint(endpoint, path, options.metadata);
  const finished = deferred<string>();
  // Retries are for a connection that worked and broke: until the server has
  // answered once, a failure is a wrong address or a server that is down.
  let reached = false;
  let sent = 0;
  /** The offset of the first HEAD: only a continued upload starts with one. */
  let continuing = false;
  // tus-js-client neither waits for the entry it adds nor for its removal
  // on success: a run that ended soon after could leave the finished upload
  // in the store (seen in CI). So the adds are tracked here, and the entries
  // go once they are written.
  const adding: Promise<unknown>[] = [];
  const urlStorage: UrlStorage = {
    findAllUploads: () => store.findAllUploads(),
    findUploadsByFingerprint: (print) => store.findUploadsByFingerprint(print),
    removeUpload: (urlStorageKey) => store.removeUpload(urlStorageKey),
    addUpload: (print, entry) => {
      const added = store.addUpload(print, entry);
      adding.push(added);
      return added;
    },
  };
  const forget = async () => {
    await Promise.allSettled(adding);
    for (const entry of await store.findUploadsByFingerprint(fingerprint)) await store.removeUpload(entry.urlStorageKey);
  };
  const upload: Upload = new Upload(createReadStream(path), {
    endpoint: endpoint.href,
    headers: authorizationOf(options),
    metadata: { filename: basename(path), ...options.metadata },
    uploadSize: size,
    retryDelays: RETRY_DELAYS,
    urlStorage,
    fingerprint: async () => fingerprint,
    storeFingerprintForResuming: true,
    removeFingerprintOnSuccess: false,
    onShouldRetry: (err, attempt, opts) => {
      if (!reached || !retryable(err as DetailedError)) return false;
      onRetry(opts.retryDelays?.[attempt] ?? 0, retryReason(err as DetailedError));
      return true;
    },
    onProgress: (bytes) => {
      sent = bytes;
      onProgress(bytes);
    },
    onAfterResponse: (req, res) => {
      reached = true;
      // Only the first answer can be about an upload a previous run left.
      const first = continuing;
      continuing = false;
      const offset = Number(res.getHeader('Upload-Offset'));
      if (req.getMethod() !== 'HEAD' || res.getStatus() !== 200 || !(offset >= 0)) return;
      sent = Math.max(sent, offset);
      if (first) onContinued(offset);
      else onResumed(offset);
    },
    onError: (err) => finished.reject(err),
    onSuccess: () => finished.resolve(upload.url!),
  });
  const previous = (await upload.findPreviousUploads()).sort((a, b) => Date.parse(b.creationTime) - Date.parse(a.creationTime));
  if (options.fresh) {
    // Give back the slots the old ones hold; one already gone is no matter.
    for (const old of previous) {
      if (old.uploadUrl) await Upload.terminate(old.uploadUrl, { headers: authorizationOf(options), retryDelays: [] }).catch(() => {});
      await store.removeUpload(old.urlStorageKey);
    }
  } else if (previous[0]) {
    upload.resumeFromPreviousUpload(previous[0]);
    continuing = true;
  }
  upload.start();
  // Ctrl-C: stop sending at once, keep the upload for the next run, exit 130.
  let interrupt = () => {};
  const interrupted = new Promise<never>((_, reject) => {
    interrupt = () => reject(new Interrupted(interruptedLine(sent, size)));
  });
  const restoreSigint = onSigint(() => interrupt());
  try {
    const url = await Promise.race([finished.promise, interrupted]);
    await forget();
    return url;
  } catch (err) {
    const refused = err instanceof DetailedError && err.originalResponse !== null && !retryable(err);
    if (refused && upload.url) await upload.abort(true).catch(() => {});
    else await upload.abort(false).catch(() => {});
    throw err;
  } finally {
    restoreSigint();
  }
}

/** The public link of the file the upload became; while another request is still finishing it, file is null. */
async function linkOf(uploadUrl: URL, key: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const req = startRequest(uploadUrl, { headers: { Authorization: `Bearer ${key}` } });
    req.end();
    const res = await responseOf(req);
    const body = await readBody(res);
    let link: unknown;
    try {
      link = JSON.parse(body)?.file?.public_link;
    } catch {
      link = undefined;
    }
    if (res.statusCode === 200 && typeof link === 'string') return link;
    if (res.statusCode !== 200 || attempt === 10) throw responseError(res.statusCode ?? 0, body);
    await sleep(1000);
  }
}

/** Uploads the file; resolves with its public link. */
export async function resumableUpload(options: ResumableUploadOptions): Promise<string> {
  const { endpoint, key, path, size } = options;
  const progress = createProgress({ enabled: options.showProgress, total: size });
  try {
    const uploadUrl = await send(options, {
      onProgress: (sent) => progress.update(sent),
      onResumed: (offset) => progress.resumed(offset),
      onNote: (line) => progress.note(line),
      onContinued: (offset) => {
        progress.note(`dropstream: resumed at ${size > 0 ? Math.floor((offset / size) * 100) : 0}% (${formatBytes(offset)} of ${formatBytes(size)} already on the server)`);
        progress.resumed(offset);
      },
      onRetry: (delayMs, reason) => {
        progress.note(`dropstream: ${retryLine(delayMs, reason)}`);
        progress.waiting(delayMs > 0 ? `retry in ${Math.ceil(delayMs / 1000)} s` : 'retrying');
      },
    });
    // A file request's upload answers no link (the file is its owner's): the receipt a plain upload through it gets.
    if (options.request) return JSON.stringify({ success: true, filename: basename(path), size });
    return await linkOf(new URL(uploadUrl), key);
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (err instanceof DetailedError && err.originalResponse) {
      throw responseError(err.originalResponse.getStatus(), err.originalResponse.getBody() ?? '');
    }
    if ((err as NodeJS.ErrnoException).path === path) throw new CliError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code})`);
    throw networkError((err as DetailedError).causingError ?? err, endpoint);
  } finally {
    progress.finish();
  }
}
