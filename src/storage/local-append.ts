// The write loop of a resumable append on the local store (local.ts): the
// body goes to an open temp file at an offset, durably.
import type { FileHandle } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { ObjectStoreError } from './object-store.js';

/**
 * Runs one filesystem call (`operation` of about `bytes`) within its
 * deadline (local.ts sizes it as for S3: store-deadlines.ts). A write to a
 * disk that hangs (a stale NFS mount) cannot be cancelled, but the request
 * waiting for it answers at the deadline.
 */
export type Bounded = (operation: string, bytes: number, work: () => Promise<unknown>) => Promise<void>;

/** Bytes an append writes between two background fdatasyncs. */
const SYNC_EVERY = 8 * 1024 * 1024;
/** The most bytes an append holds while a write is in flight. */
const BATCH = 1024 * 1024;

/**
 * Writes `body` into `handle` from `offset` on and syncs it. Resolves with
 * the offset after the last byte the body delivered, and the body's error if
 * it failed midway (everything before it is written and synced); rejects with
 * `storeError(err)` when the file cannot be written or synced.
 *
 * Writes go out one at a time, each carrying what arrived while the one
 * before was in flight (at most BATCH bytes wait), so receiving never stops
 * for a write. What the next request continues from must survive a crash of
 * this machine, so the append ends with an fdatasync; syncing as it goes
 * (every SYNC_EVERY bytes) leaves that last one little to do.
 */
export async function appendAt(
  handle: FileHandle,
  body: AsyncIterable<Buffer>,
  offset: number,
  storeError: (err: unknown) => ObjectStoreError,
  bound: Bounded,
): Promise<{ offset: number; interrupted?: unknown }> {
  let interrupted: unknown;
  let writing: Promise<void> = Promise.resolve();
  let syncing: Promise<void> = Promise.resolve();
  let batch: Buffer[] = [];
  let batched = 0;
  let writeAt = offset;
  let unsynced = 0;
  /** Queues the batch's write; a sync too once SYNC_EVERY bytes are unsynced, unless the final sync follows anyway. */
  const flush = (last = false) => {
    const buffers = batch;
    const at = writeAt;
    const size = batched;
    writeAt += batched;
    unsynced += batched;
    batch = [];
    batched = 0;
    writing = writing.then(() => bound('write', size, () => writeAll(handle, buffers, at)));
    if (!last && unsynced >= SYNC_EVERY) {
      unsynced = 0;
      const written = writing;
      syncing = Promise.all([syncing, written]).then(() => bound('fsync', SYNC_EVERY, () => handle.datasync()));
      syncing.catch(() => undefined); // reported by the final sync
    }
  };
  try {
    try {
      for await (const chunk of body) {
        batch.push(chunk);
        batched += chunk.length;
        if (batched >= BATCH) {
          await writing.catch((err: unknown) => {
            throw storeError(err);
          });
          flush();
        }
      }
    } catch (err) {
      // The store's own failures end the append; the body's are an interruption.
      if (err instanceof ObjectStoreError) throw err;
      interrupted = err ?? new Error('the body ended early');
    }
    flush(true);
    await Promise.all([writing, syncing]);
    // An append that wrote nothing has nothing to make durable.
    if (writeAt > offset) await bound('fsync', SYNC_EVERY, () => handle.datasync());
  } catch (err) {
    throw err instanceof ObjectStoreError ? err : storeError(err);
  } finally {
    // Nothing may write to the file once the append has answered.
    await Promise.allSettled([writing, syncing]);
  }
  return { offset: writeAt, interrupted };
}

/** Writes every byte of `buffers` at `position` (writev may write less than asked). */
async function writeAll(handle: FileHandle, buffers: Buffer[], position: number): Promise<void> {
  let rest = buffers;
  let at = position;
  while (rest.length) {
    const { bytesWritten } = await handle.writev(rest, at);
    at += bytesWritten;
    let skip = bytesWritten;
    const next: Buffer[] = [];
    for (const buffer of rest) {
      if (skip >= buffer.length) skip -= buffer.length;
      else {
        next.push(skip ? buffer.subarray(skip) : buffer);
        skip = 0;
      }
    }
    rest = next;
  }
}

/**
 * A stream of bytes into `handle` from position 0, each write within its
 * deadline (put() in local.ts). Writes go out in batches of BATCH bytes,
 * one at a time, as appendAt's do: the body comes in chunks of about 64 KiB,
 * and a write per chunk (a libuv round trip, a thread woken, a deadline
 * timer) kept the main thread busy enough that a plain upload ran at 0.4x
 * the busboy-to-file party on a busy machine, where tus, batching, did not
 * (docs/performance.md). Ends once the bytes are on the disk (fdatasync,
 * its deadline sized to the whole file, since that is what may still be in
 * the page cache): the file is renamed into place and its row committed
 * next, and the row must never name bytes a power cut took. Closes the
 * handle when it ends or fails, without waiting for a write or a sync that
 * hangs.
 */
export function fileWriter(handle: FileHandle, bound: Bounded): Writable & { bytesWritten: number } {
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= handle.close().catch(() => undefined));
  let batch: Buffer[] = [];
  let batched = 0;
  let position = 0;
  let writing: Promise<void> = Promise.resolve();
  /** Queues the batch's write after the one in flight. */
  const flush = () => {
    const buffers = batch;
    const size = batched;
    const at = position;
    batch = [];
    batched = 0;
    position += size;
    writing = writing.then(() => bound('write', size, () => writeAll(handle, buffers, at))).then(() => {
      out.bytesWritten += size;
    });
    writing.catch(() => undefined); // reported by the next write or by final
  };
  const out = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        batch.push(chunk);
        batched += chunk.length;
        if (batched < BATCH) return callback();
        // Wait for the write in flight, if any, then send this batch and take more meanwhile.
        writing.then(() => {
          flush();
          callback();
        }, callback);
      },
      final(callback) {
        writing
          .then(() => {
            if (batched) flush();
            return writing;
          })
          .then(() => bound('fsync', out.bytesWritten, () => handle.datasync()))
          .then(
            () => close().then(() => callback()),
            (err: unknown) => {
              void close();
              callback(err as Error);
            },
          );
      },
      destroy(err, callback) {
        void close();
        callback(err);
      },
    }),
    { bytesWritten: 0 },
  );
  return out;
}
