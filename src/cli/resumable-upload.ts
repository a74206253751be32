// `dropstream upload` for large files: tus (resumable) through tus-js-client,
// the protocol's official client. A cut connection or a server error is
// retried with back-off, continuing from the offset the server stored; the
// progress line says where it resumed.
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { DetailedError, Upload } from 'tus-js-client';
import { CliError } from './admin-client.js';
import { createProgress } from './progress.js';

/** Files from this size on go resumable unless --plain is given. */
export const RESUMABLE_THRESHOLD = 64 * 1024 * 1024;

/** Back-off between attempts, in ms; the count starts again after any progress (tus-js-client). */
const RETRY_DELAYS = [0, 1_000, 3_000, 5_000, 10_000, 20_000, 30_000, 60_000, 60_000, 60_000];

export interface ResumableUploadOptions {
  /** The API's base, e.g. http://host:3000 (with any path prefix). */
  server: string;
  key: string;
  path: string;
  size: number;
  showProgress: boolean;
  /** Turns an error answer into our one-line error. */
  responseError: (status: number, body: string) => CliError;
  networkError: (err: unknown) => CliError;
}

/** Retried: no answer at all, 5xx, 409/423 (another request still holds the upload), 429 (rate limit). */
function retryable(err: DetailedError): boolean {
  const status = err.originalResponse?.getStatus();
  return status === undefined || status === 0 || status >= 500 || status === 409 || status === 423 || status === 429;
}

/** Uploads the file; resolves with its public link. */
export async function resumableUpload(options: ResumableUploadOptions): Promise<string> {
  const { server, key, path, size } = options;
  const progress = createProgress({ enabled: options.showProgress, total: size });
  const headers = { Authorization: `Bearer ${key}` };
  try {
    const uploadUrl = await new Promise<string>((resolve, reject) => {
      const upload = new Upload(createReadStream(path), {
        endpoint: `${server}/api/v1/uploads`,
        headers,
        metadata: { filename: basename(path) },
        uploadSize: size,
        retryDelays: RETRY_DELAYS,
        onShouldRetry: (err) => retryable(err as DetailedError),
        onProgress: (sent) => progress.update(sent),
        onAfterResponse: (req, res) => {
          const offset = Number(res.getHeader('Upload-Offset'));
          if (req.getMethod() === 'HEAD' && res.getStatus() === 200 && offset > 0) progress.resumed(offset);
        },
        onError: reject,
        onSuccess: () => resolve(upload.url!),
      });
      upload.start();
    });
    // The upload URL answers with the file it became, whichever request
    // finished it; while another request is still finishing it, file is null.
    for (let attempt = 1; ; attempt++) {
      const res = await fetch(uploadUrl, { headers });
      const body = await res.text();
      let link: unknown;
      try {
        link = JSON.parse(body)?.file?.public_link;
      } catch {
        link = undefined;
      }
      if (res.status === 200 && typeof link === 'string') return link;
      if (res.status !== 200 || attempt === 10) throw options.responseError(res.status, body);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (err instanceof DetailedError && err.originalResponse) {
      throw options.responseError(err.originalResponse.getStatus(), err.originalResponse.getBody() ?? '');
    }
    if ((err as NodeJS.ErrnoException).path === path) throw new CliError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code})`);
    throw options.networkError((err as DetailedError).causingError ?? err);
  } finally {
    progress.finish();
  }
}
