// One PATCH body into the store (resumable.ts holds the lease around it):
// counted against the limit, hashed into the upload's running SHA-256 and
// checked against Upload-Checksum on the way, with nothing between the body
// and the store's for-await, so what is counted and hashed is exactly what
// the store received.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { createSHA256 } from 'hash-wasm';
import type { AppError } from '../errors.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { AppendResult, ResumableState } from '../storage/resumable.js';
import type { ResumableRow } from './resumable-records.js';

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
 * The SHA-256 of an upload so far, continued from `state` (hash-wasm can
 * save and load its state; Node's crypto cannot), or new.
 */
export async function hasher(state?: Uint8Array) {
  const hash = await createSHA256();
  if (state) hash.load(state);
  else hash.init();
  return hash;
}

export interface Written extends AppendResult {
  /** Bytes of the body the store received. */
  received: number;
  /** The upload's hash state after them. */
  hashState: Uint8Array;
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
  options: { length?: number; limit: number; overLimit: () => AppError; onState: (state: ResumableState) => Promise<void> },
): Promise<Written> {
  const hash = await hasher(row.hashState);
  const checksum = input.checksum ? createHash('sha256') : undefined;
  let received = 0;
  async function* measured(): AsyncGenerator<Buffer> {
    for await (const chunk of input.body as AsyncIterable<Buffer>) {
      if (received + chunk.length > options.limit) throw options.overLimit();
      received += chunk.length;
      hash.update(chunk);
      checksum?.update(chunk);
      yield chunk;
    }
  }
  const result = await store.appendResumable(row.storageKey, row.storeState, measured(), { offset: row.offset, length: options.length, onState: options.onState });
  if (result.offset !== row.offset + received) throw new Error(`the store kept ${result.offset - row.offset} bytes of ${received}`);
  const checksumFailed = checksum !== undefined && (result.interrupted !== undefined || !checksum.digest().equals(input.checksum!));
  return { ...result, received, hashState: hash.save(), checksumFailed };
}
