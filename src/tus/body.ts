// One PATCH body into the store (resumable.ts holds the lease around it):
// counted against the limit, hashed into the upload's running SHA-256 and
// checked against Upload-Checksum on the way, with nothing between the body
// and the store's for-await, so what is counted and hashed is exactly what
// the store received.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { AppError } from '../errors.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { AppendResult, ResumableState } from '../storage/resumable.js';
import { continueHash } from './hash.js';
import type { HeldHashes } from './held-hashes.js';
import type { ResumableRow } from './records.js';

export interface AppendInput {
  /** Upload-Offset: where the client says the body continues. */
  offset: number;
  /** Upload-Length sent with this request (declares a deferred length). */
  length?: number;
  /** Content-Length, when the client sent one: checked against the limits before any byte is read. */
  bodySize?: number;
  body: Readable;
  /** Upload-Checksum: the SHA-256 of this body; a mismatch keeps none of it. */
  checksum?: Buffer;
}

/**
 * How a body stops when its request is told to (resumable.ts: the lease's
 * signal). A newer request taking over (`settles(reason)` true) does not cut
 * at once: what is already in flight is read and stored first (see
 * stopWhenQuiet). Any other reason (the lease was lost) cuts at once.
 */
export interface StopOptions {
  signal: AbortSignal;
  /** Whether a stop for `reason` may first read what is in flight. */
  settles(reason: unknown): boolean;
  /** The longest a settling stop reads on. */
  graceMs: number;
  /** The error the body ends with. */
  error(reason: unknown): Error;
}

/**
 * A pause this long while waiting for the body's next chunk means nothing
 * more is in flight. The bytes of a connection that died (a reset, or a
 * client that went silent) are already in this machine's buffers, some
 * megabytes on loopback, and come back to back; without reading them, the
 * client resent them (issue 19: 1.06-1.08x the file after a reset).
 */
const QUIET_MS = 150;

/**
 * Watches the body for `stop.signal`: once it aborts, the body is destroyed
 * (with `stop.error(reason)`) when a wait for its next chunk lasts
 * QUIET_MS, or after `stop.graceMs` however fast bytes still come: a client
 * alive and sending does not hold the upload against the newer request.
 * `waiting(true)` before each wait for a chunk, `waiting(false)` after.
 */
function stopWhenQuiet(body: Readable, stop: StopOptions) {
  let waitingNow = false;
  let quiet: NodeJS.Timeout | undefined;
  let grace: NodeJS.Timeout | undefined;
  let deadline = 0;
  const cut = () => {
    if (!body.readableEnded) body.destroy(stop.error(stop.signal.reason));
  };
  const armQuiet = () => {
    clearTimeout(quiet);
    if (waitingNow && stop.signal.aborted) quiet = setTimeout(cut, Math.max(0, Math.min(QUIET_MS, deadline - Date.now())));
  };
  const onAbort = () => {
    if (!stop.settles(stop.signal.reason)) return cut();
    deadline = Date.now() + stop.graceMs;
    grace = setTimeout(cut, stop.graceMs);
    armQuiet();
  };
  if (stop.signal.aborted) onAbort();
  else stop.signal.addEventListener('abort', onAbort, { once: true });
  return {
    waiting(now: boolean) {
      waitingNow = now;
      if (now) armQuiet();
      else clearTimeout(quiet);
    },
    done() {
      stop.signal.removeEventListener('abort', onAbort);
      clearTimeout(quiet);
      clearTimeout(grace);
    },
  };
}

export interface Written extends AppendResult {
  /** Bytes of the body the store received. */
  received: number;
  /** The upload's hash state after them. */
  hashState: Uint8Array;
  /** To call once a row holding `hashState` is saved under the request's lock (hash.ts: RunningHash.end). */
  hashSaved(): void;
  /** Upload-Checksum was sent and the body does not match it (or was cut, so cannot be checked). */
  checksumFailed: boolean;
}

/**
 * Appends `input.body` to the upload of `row` at its offset. A body past
 * `limit` bytes is cut with `overLimit()`, which the result reports as its
 * interruption, like a client hang-up: what came before is stored.
 */
export async function writeBody(
  store: ObjectStore,
  row: ResumableRow,
  input: AppendInput,
  options: {
    length?: number;
    limit: number;
    overLimit: () => AppError;
    onState: (state: ResumableState) => Promise<void>;
    /** Running hashes held in this instance between requests. */
    held: HeldHashes;
    stop?: StopOptions;
    /** Awaited before each chunk with the upload's size after it; throws to cut the body there (the storage quota). */
    admit?: (after: number) => Promise<void>;
  },
): Promise<Written> {
  const hash = await continueHash(row, options.held);
  const checksum = input.checksum ? createHash('sha256') : undefined;
  const stopping = options.stop ? stopWhenQuiet(input.body, options.stop) : undefined;
  let received = 0;
  async function* measured(): AsyncGenerator<Buffer> {
    stopping?.waiting(true);
    for await (const chunk of input.body as AsyncIterable<Buffer>) {
      stopping?.waiting(false);
      if (received + chunk.length > options.limit) throw options.overLimit();
      await options.admit?.(row.offset + received + chunk.length);
      received += chunk.length;
      hash.update(chunk);
      checksum?.update(chunk);
      yield chunk;
      stopping?.waiting(true);
    }
    stopping?.waiting(false);
  }
  let result: AppendResult;
  try {
    result = await store.appendResumable(row.storageKey, row.storeState, measured(), { offset: row.offset, length: options.length, onState: options.onState });
  } finally {
    stopping?.done();
  }
  if (result.offset !== row.offset + received) throw new Error(`the store kept ${result.offset - row.offset} bytes of ${received}`);
  const checksumFailed = checksum !== undefined && (result.interrupted !== undefined || !checksum.digest().equals(input.checksum!));
  const { state: hashState, saved: hashSaved } = hash.end(result.offset === options.length);
  return { ...result, received, hashState, hashSaved, checksumFailed };
}
