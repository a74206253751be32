// The SHA-256 of a resumable upload, kept between requests as the row's
// `hashState` bytes, in one of three forms:
//   - hash-wasm's saved state: the running hash of the bytes so far;
//   - DIGEST_TAG + 32 bytes: the digest of the whole upload, known;
//   - empty: not known; the digest is read from the completed object.
// Node's crypto (OpenSSL) hashes about 6.5x faster than hash-wasm here
// (1.75 GB/s against 0.26 GB/s on this machine: on the local store the
// running hash was a third of the server's CPU), but cannot save its state.
// So a request whose body carries the whole upload hashes with Node's crypto
// and keeps only the digest; if it is cut, what it stored is hashed once
// more, from the object, when the upload completes (and no later request
// hashes anything). Every other request continues the running hash.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';

const DIGEST_TAG = 0x01;
const DIGEST_STATE_LENGTH = 33;
/** The state of an upload whose bytes will be hashed from the completed object. */
const UNKNOWN = new Uint8Array(0);

const isDigest = (state: Uint8Array) => state.length === DIGEST_STATE_LENGTH && state[0] === DIGEST_TAG;

async function wasmHash(state?: Uint8Array) {
  // Imported here, so a server loads it with its first resumable upload.
  const { createSHA256 } = await import('hash-wasm');
  const hash = await createSHA256();
  if (state) hash.load(state);
  else hash.init();
  return hash;
}

/** The hash state of a new upload: hash-wasm's empty one (what every instance, old or new, can continue). */
export async function initialHashState(): Promise<Uint8Array> {
  return (await wasmHash()).save();
}

export interface RunningHash {
  update(chunk: Buffer): void;
  /** The state to save after this request; `complete`: the upload's last byte is in. Call once. */
  state(complete: boolean): Uint8Array;
}

/**
 * Continues the hash of an upload from `state`. `wholeUpload`: this request
 * starts at offset 0 and its body is declared to be the whole upload.
 */
export async function continueHash(state: Uint8Array, { wholeUpload }: { wholeUpload: boolean }): Promise<RunningHash> {
  if (state.length === 0) return { update() {}, state: () => UNKNOWN };
  if (isDigest(state)) throw new Error('the upload is complete: its hash takes no more bytes');
  if (wholeUpload) {
    const hash = createHash('sha256');
    return {
      update: (chunk) => hash.update(chunk),
      state: (complete) => (complete ? Uint8Array.of(DIGEST_TAG, ...hash.digest()) : UNKNOWN),
    };
  }
  const hash = await wasmHash(state);
  return { update: (chunk) => hash.update(chunk), state: () => hash.save() };
}

/** The hex SHA-256 of a complete upload; `read` opens the completed object, for a state that does not know it. */
export async function digestOf(state: Uint8Array, read: () => Promise<Readable>): Promise<string> {
  if (isDigest(state)) return Buffer.from(state.subarray(1)).toString('hex');
  if (state.length > 0) return (await wasmHash(state)).digest('hex');
  const hash = createHash('sha256');
  for await (const chunk of await read()) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
