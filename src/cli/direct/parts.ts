// The parts of an upload straight to the store: a few PUTs at once, each
// part read from the file as a stream of exactly its length (never the whole
// file, nor a whole part, in memory), each to a URL the service signed for
// that length. A failed part is sent again with back-off, a bounded number of
// times; a URL the store refused (403: expired, or a clock that disagrees) is
// signed anew first.
import { createReadStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError } from '../cli-error.js';
import { networkReason, readBody, responseOf, startRequest } from '../transfer-http.js';
import { RETRY_DELAYS } from './api.js';

/** Parts in flight at once: enough to fill a link, few enough for a laptop's upstream and the store's connections. */
export const PARTS_AT_ONCE = 4;

export interface Part {
  partNumber: number;
  /** Where the part starts in the file. */
  offset: number;
  size: number;
}

export interface PartSource {
  /** A URL for the part, valid for a while yet; `fresh` asks for a new one (the store refused the last). */
  urlFor(partNumber: number, fresh: boolean): Promise<string>;
}

export interface SendPartsOptions {
  path: string;
  parts: Part[];
  urls: PartSource;
  signal: AbortSignal;
  concurrency?: number;
  /** Bytes of a part left (positive) or taken back when the part failed (negative). */
  onBytes(delta: number): void;
  /** The store holds the part; `etag` is its answer's ETag, as complete wants it. */
  onStored(partNumber: number, etag: string): void;
  onRetry(delayMs: number, reason: string): void;
}

/** A part the store refused or never answered: `status` 0 when no answer came. */
class PartFailed extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/** One PUT of one part; resolves with the store's ETag. */
async function putPart(path: string, part: Part, url: string, signal: AbortSignal, onBytes: (delta: number) => void): Promise<string> {
  let sent = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      sent += chunk.length;
      onBytes(chunk.length);
      callback(null, chunk);
    },
  });
  // The length is part of the signature: exactly this, never chunked.
  const req = startRequest(new URL(url), { method: 'PUT', headers: { 'Content-Length': part.size }, signal });
  const answered = responseOf(req);
  // The store may answer before reading the body (a refused signature): the answer is what counts.
  const sending = pipeline(createReadStream(path, { start: part.offset, end: part.offset + part.size - 1 }), counter, req).catch((err: unknown) => err);
  try {
    const res = await answered;
    const body = await readBody(res);
    const status = res.statusCode ?? 0;
    const etag = res.headers.etag;
    if (status === 200 && etag) {
      await sending;
      return etag;
    }
    throw new PartFailed(status, status === 200 ? 'the store answered without an ETag' : `the store answered ${status}${storeCode(body)}`);
  } catch (err) {
    // Destroyed, the request ends the pipeline too, so what stopped the file's reading is known.
    req.destroy();
    const readError = (await sending) as NodeJS.ErrnoException | undefined;
    onBytes(-sent);
    if (readError?.path === path) throw new CliError(`cannot read ${path} (${readError.code})`);
    if (err instanceof PartFailed || signal.aborted) throw err;
    throw new PartFailed(0, networkReason(err));
  }
}

/** ` (SignatureDoesNotMatch)`: the code of an S3 error body, when there is one. */
const storeCode = (body: string) => {
  const code = /<Code>([^<]{1,64})<\/Code>/.exec(body)?.[1];
  return code ? ` (${code})` : '';
};

/** Worth another try: no answer, the store failing or slowing us down, or a URL it would not take (signed anew first). */
const retryable = (status: number) => status === 0 || status >= 500 || status === 429 || status === 403 || status === 408;

/** One part to its end: sent, retried with back-off, or given up (the error says why). */
async function sendPart(options: SendPartsOptions, part: Part): Promise<void> {
  let fresh = false;
  for (let attempt = 0; ; attempt++) {
    const url = await options.urls.urlFor(part.partNumber, fresh);
    try {
      const etag = await putPart(options.path, part, url, options.signal, options.onBytes);
      options.onStored(part.partNumber, etag);
      return;
    } catch (err) {
      if (!(err instanceof PartFailed) || options.signal.aborted) throw err;
      if (!retryable(err.status) || attempt >= RETRY_DELAYS.length) throw new CliError(`part ${part.partNumber}: ${err.reason}`);
      fresh = err.status === 403;
      const delay = RETRY_DELAYS[attempt]!;
      options.onRetry(delay, `part ${part.partNumber}: ${err.reason}`);
      await sleep(delay, undefined, { signal: options.signal });
    }
  }
}

/**
 * Sends `parts`, at most `concurrency` at once, in order of part number.
 * The first part that fails for good stops the rest (their requests are
 * aborted) and is what this rejects with; the parts stored until then stay
 * in the store for a later run.
 */
export async function sendParts(options: SendPartsOptions): Promise<void> {
  const queue = [...options.parts];
  const stop = new AbortController();
  const signal = AbortSignal.any([options.signal, stop.signal]);
  const worker = async () => {
    for (let part = queue.shift(); part && !signal.aborted; part = queue.shift()) await sendPart({ ...options, signal }, part);
  };
  const workers = Array.from({ length: Math.min(options.concurrency ?? PARTS_AT_ONCE, queue.length) }, () =>
    worker().catch((err: unknown) => {
      stop.abort();
      throw err;
    }),
  );
  const results = await Promise.allSettled(workers);
  // The first failure is the cause; the others are its abort.
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected' && !(stop.signal.aborted && isAbort(r.reason) && !options.signal.aborted));
  if (failed) throw failed.reason;
  if (options.signal.aborted) throw options.signal.reason;
}

const isAbort = (err: unknown) => (err as Error)?.name === 'AbortError';
