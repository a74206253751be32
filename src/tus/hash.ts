// The SHA-256 of a resumable upload, kept between requests as the row's
// `hashState` bytes, in one of four forms:
//   - HELD_TAG + a random token: the running hash is held in the memory of
//     the instance that saved the row (held-hashes.ts), under that token;
//   - hash-wasm's saved state: the running hash of the bytes so far (rows
//     saved before held hashes, and every new upload's empty state);
//   - DIGEST_TAG + 32 bytes: the digest of the whole upload, known;
//   - empty: not known; the digest is read from the completed object.
// Node's crypto (OpenSSL) hashes about 6.5x faster than hash-wasm here
// (1.75 GB/s against 0.26 GB/s on this machine: the running hash was 35-45%
// of a tus server's busy time), but cannot save its state in the row. So an
// upload is hashed by Node's crypto from its first byte and its hash is held
// between requests by the instance that wrote them; a request that finds
// the hash elsewhere (another instance, a restart, an entry evicted, a byte
// count not the row's) hashes nothing, and the completed object is read
// once instead (digestOf). Rows in hash-wasm's form continue with hash-wasm.
import { createHash, randomBytes, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { HeldHashes } from './held-hashes.js';

const DIGEST_TAG = 0x01;
const DIGEST_STATE_LENGTH = 33;
const HELD_TAG = 0x02;
const TOKEN_BYTES = 16;
const HELD_STATE_LENGTH = 1 + TOKEN_BYTES;
/** The state of an upload whose bytes will be hashed from the completed object. */
const UNKNOWN = new Uint8Array(0);

const isDigest = (state: Uint8Array) => state.length === DIGEST_STATE_LENGTH && state[0] === DIGEST_TAG;
/** The token of a held hash's state, or undefined for another form. (hash-wasm's states are over 100 bytes.) */
const heldToken = (state: Uint8Array) => (state.length === HELD_STATE_LENGTH && state[0] === HELD_TAG ? Buffer.from(state.subarray(1)).toString('hex') : undefined);

async function wasmHash(state?: Uint8Array) {
  // Imported here, so a server loads it with its first resumable upload.
  const { createSHA256 } = await import('hash-wasm');
  const hash = await createSHA256();
  if (state) hash.load(state);
  else hash.init();
  return hash;
}

let emptyWasmState: Promise<Uint8Array> | undefined;

/**
 * The hash state of a new upload: hash-wasm's empty one, which an instance
 * that predates held hashes can still continue (during an upgrade); this
 * one starts Node's crypto on it (continueHash).
 */
export function initialHashState(): Promise<Uint8Array> {
  emptyWasmState ??= wasmHash().then((hash) => hash.save());
  return emptyWasmState;
}

/** The row an upload's hash continues from. */
export interface HashedRow {
  id: string;
  /** Bytes stored so far. */
  offset: number;
  hashState: Uint8Array;
}

export interface RunningHash {
  update(chunk: Buffer): void;
  /**
   * The state to save after this request (`complete`: the upload's last
   * byte is in), and `saved`, to call once a row holding it is saved under
   * the request's lock (a held hash is put in memory only then). Call once.
   */
  end(complete: boolean): { state: Uint8Array; saved(): void };
}

const nothingToDo = () => {};
const notHashing = (): RunningHash => ({ update() {}, end: () => ({ state: UNKNOWN, saved: nothingToDo }) });

/** Node's crypto from `hash`, which consumed `bytes` bytes of upload `id`; held in `held` between requests. */
function nodeHash(id: string, hash: Hash, bytes: number, held: HeldHashes): RunningHash {
  return {
    update(chunk) {
      hash.update(chunk);
      bytes += chunk.length;
    },
    end(complete) {
      if (complete) return { state: Uint8Array.of(DIGEST_TAG, ...hash.digest()), saved: () => held.drop(id) };
      const token = randomBytes(TOKEN_BYTES);
      return { state: Uint8Array.of(HELD_TAG, ...token), saved: () => held.save(id, token.toString('hex'), bytes, hash) };
    },
  };
}

/** Continues the hash of upload `row` from its saved state, with a hash `held` here when the state names one. */
export async function continueHash(row: HashedRow, held: HeldHashes): Promise<RunningHash> {
  const { hashState: state } = row;
  if (state.length === 0) return notHashing();
  if (isDigest(state)) throw new Error('the upload is complete: its hash takes no more bytes');
  const token = heldToken(state);
  if (token !== undefined) {
    // Only a copy is continued: the held one stays as the row names it until a newer row is saved.
    const hash = held.copy(row.id, token, row.offset);
    return hash ? nodeHash(row.id, hash, row.offset, held) : notHashing();
  }
  if (row.offset === 0 && Buffer.from(state).equals(await initialHashState())) return nodeHash(row.id, createHash('sha256'), 0, held);
  const hash = await wasmHash(state);
  return { update: (chunk) => hash.update(chunk), end: () => ({ state: hash.save(), saved: nothingToDo }) };
}

/**
 * The hex SHA-256 of complete upload `row`: from its state, a hash held
 * here, or else by reading the completed object (`read` opens it).
 */
export async function digestOf(row: HashedRow, held: HeldHashes, read: () => Promise<Readable>): Promise<string> {
  const { hashState: state } = row;
  if (isDigest(state)) return Buffer.from(state.subarray(1)).toString('hex');
  const token = heldToken(state);
  const kept = token === undefined ? undefined : held.copy(row.id, token, row.offset);
  if (kept) return kept.digest('hex');
  if (state.length > 0 && token === undefined) return (await wasmHash(state)).digest('hex');
  const hash = createHash('sha256');
  for await (const chunk of await read()) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
