// `dropstream upload` for large files: tus (resumable) through tus-js-client,
// the protocol's official client. A connection that worked and then broke, or
// a server error, is retried with back-off (each retry announced on a line of
// its own), continuing from the offset the server stored; the progress line
// says it waits, then where it resumed. A server never reached is not retried:
// a wrong address or a server that is down fails at once, as a small file does.
import { setTimeout as sleep } from 'node:timers/promises';
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { DetailedError, Upload } from 'tus-js-client';
import { CliError } from './admin-client.js';
import { createProgress } from './progress.js';
import { networkError, readBody, responseError, responseOf, startRequest } from './transfer-http.js';

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
}

/** Retried: no answer at all, 5xx, 409/423 (another request still holds the upload), 429 (rate limit). */
function retryable(err: DetailedError): boolean {
  const status = err.originalResponse?.getStatus();
  return status === undefined || status === 0 || status >= 500 || status === 409 || status === 423 || status === 429;
}

const REASONS: Record<string, string> = {
  ECONNRESET: 'connection reset',
  ECONNREFUSED: 'connection refused',
  EPIPE: 'connection broken',
  ETIMEDOUT: 'connection timed out',
  ECONNABORTED: 'connection aborted',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'name lookup failed',
};

/** Why a request failed, in a few words: `connection reset`, `server answered 503`. */
export function retryReason(err: DetailedError): string {
  const status = err.originalResponse?.getStatus();
  if (status === 409 || status === 423) return `server answered ${status} (the upload is still busy with the cut request)`;
  if (status === 429) return `server answered 429 (rate limited)`;
  if (status) return `server answered ${status}`;
  const cause = (err.causingError ?? err) as NodeJS.ErrnoException;
  return (cause.code && REASONS[cause.code]) ?? cause.code ?? cause.message ?? 'request failed';
}

/** The retry announcement: `retrying in 5 s: connection reset`. */
export const retryLine = (delayMs: number, reason: string) => (delayMs > 0 ? `retrying in ${Math.ceil(delayMs / 1000)} s: ${reason}` : `retrying now: ${reason}`);

export interface SendEvents {
  onProgress(sent: number): void;
  onResumed(offset: number): void;
  /** A retry is coming after `delayMs`, for `reason`. */
  onRetry(delayMs: number, reason: string): void;
}

/**
 * Sends the file with tus; resolves with the upload's URL. An upload given
 * up on (retries spent, an error answer, Ctrl-C) is terminated: this client
 * keeps no upload URLs between runs, so nothing could continue it, and it
 * would hold a daily upload slot until it expired.
 */
async function send(options: ResumableUploadOptions, { onProgress, onResumed, onRetry }: SendEvents): Promise<string> {
  const { endpoint, key, path, size } = options;
  let upload: Upload | undefined;
  // Retries are for a connection that worked and broke: until the server has
  // answered once, a failure is a wrong address or a server that is down.
  let reached = false;
  const finished: Promise<string> = new Promise((resolve, reject) => {
    upload = new Upload(createReadStream(path), {
      endpoint: endpoint.href,
      headers: { Authorization: `Bearer ${key}` },
      metadata: { filename: basename(path) },
      uploadSize: size,
      retryDelays: RETRY_DELAYS,
      onShouldRetry: (err, attempt, opts) => {
        if (!reached || !retryable(err as DetailedError)) return false;
        onRetry(opts.retryDelays?.[attempt] ?? 0, retryReason(err as DetailedError));
        return true;
      },
      onProgress,
      onAfterResponse: (req, res) => {
        reached = true;
        const offset = Number(res.getHeader('Upload-Offset'));
        if (req.getMethod() === 'HEAD' && res.getStatus() === 200 && offset >= 0) onResumed(offset);
      },
      onError: reject,
      onSuccess: () => resolve(upload!.url!),
    });
    upload.start();
  });
  // Ctrl-C: give the upload up (terminated below) rather than leave it half done.
  let onInterrupt = () => {};
  const interrupted = new Promise<never>((_, reject) => {
    onInterrupt = () => reject(new CliError('interrupted'));
    process.once('SIGINT', onInterrupt);
  });
  try {
    return await Promise.race([finished, interrupted]);
  } catch (err) {
    if (upload?.url) await upload.abort(true).catch(() => {});
    else await upload?.abort(false).catch(() => {});
    throw err;
  } finally {
    process.off('SIGINT', onInterrupt);
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
      onRetry: (delayMs, reason) => {
        progress.note(`dropstream: ${retryLine(delayMs, reason)}`);
        progress.waiting(delayMs > 0 ? `retry in ${Math.ceil(delayMs / 1000)} s` : 'retrying');
      },
    });
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
