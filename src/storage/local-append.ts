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
 * The chunks of a body gathered into writes of up to BATCH bytes at
 * consecutive positions of `handle`, one write at a time, each carrying what
 * arrived while the one before was in flight: receiving never stops for a
 * write, and at most about twice BATCH is held. A write per 64 KiB chunk (a
 * libuv round trip, a thread woken, a deadline timer) kept a plain upload's
 * main thread busy enough to run at 0.4x the busboy-to-file party on a busy
 * machine (docs/performance.md).
 */
class BatchedWrites {
  private batch: Buffer[] = [];
  private batched = 0;
  /** The writes queued so far, in order; rejects with the first one's failure. */
  writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly handle: FileHandle,
    /** Where the next batch goes: the end of what is queued. */
    public position: number,
    private readonly bound: Bounded,
    /** Told each batch queued (`last`: by finish()), its write being the latest `writing`. */
    private readonly onQueued: (size: number, last: boolean) => void = () => {},
  ) {}

  /**
   * Takes `chunk`. When that fills the batch, returns the wait for the write
   * in flight (rejecting with its failure), after which the batch is queued;
   * otherwise nothing, so the caller goes on without a promise per chunk.
   */
  add(chunk: Buffer): Promise<void> | undefined {
    this.batch.push(chunk);
    this.batched += chunk.length;
    if (this.batched < BATCH) return undefined;
    return this.writing.then(() => this.queue(false));
  }

  /** Queues what is left; resolves once every write is done. */
  finish(): Promise<void> {
    if (this.batched) this.queue(true);
    return this.writing;
  }

  private queue(last: boolean): void {
    const buffers = this.batch;
    const size = this.batched;
    const at = this.position;
    this.batch = [];
    this.batched = 0;
    this.position += size;
    this.writing = this.writing.then(() => this.bound('write', size, () => writeAll(this.handle, buffers, at)));
    this.writing.catch(() => undefined); // reported by the next add() or by finish()
    this.onQueued(size, last);
  }
}

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
  let syncing: Promise<void> = Promise.resolve();
  let unsynced = 0;
  // A sync after the writes so far, once SYNC_EVERY bytes are unsynced, unless the final sync follows anyway.
  const writes: BatchedWrites = new BatchedWrites(handle, offset, bound, (size, last) => {
    unsynced += size;
    if (last || unsynced < SYNC_EVERY) return;
    unsynced = 0;
    syncing = Promise.all([syncing, writes.writing]).then(() => bound('fsync', SYNC_EVERY, () => handle.datasync()));
    syncing.catch(() => undefined); // reported by the final sync
  });
  try {
    try {
      for await (const chunk of body) {
        await writes.add(chunk)?.catch((err: unknown) => {
          throw storeError(err);
        });
      }
    } catch (err) {
      // The store's own failures end the append; the body's are an interruption.
      if (err instanceof ObjectStoreError) throw err;
      interrupted = err ?? new Error('the body ended early');
    }
    await Promise.all([writes.finish(), syncing]);
    // An append that wrote nothing has nothing to make durable.
    if (writes.position > offset) await bound('fsync', SYNC_EVERY, () => handle.datasync());
  } catch (err) {
    throw err instanceof ObjectStoreError ? err : storeError(err);
  } finally {
    // Nothing may write to the file once the append has answered.
    await Promise.allSettled([writes.writing, syncing]);
  }
  return { offset: writes.position, interrupted };
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
 * A stream of bytes into `handle` from position 0, written in batches
 * (BatchedWrites), each write within its deadline (put() in local.ts). Ends
 * once the bytes are on the disk (fdatasync, its deadline sized to the whole
 * file, since that is what may still be in the page cache): the file is
 * renamed into place and its row committed next, and the row must never
 * name bytes a power cut took. Closes the handle when it ends or fails,
 * without waiting for a write or a sync that hangs.
 */
export function fileWriter(handle: FileHandle, bound: Bounded): Writable & { bytesWritten: number } {
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= handle.close().catch(() => undefined));
  const writes = new BatchedWrites(handle, 0, bound);
  const out = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        const full = writes.add(chunk);
        if (!full) return callback();
        full.then(() => callback(), callback);
      },
      final(callback) {
        writes
          .finish()
          .then(() => {
            out.bytesWritten = writes.position;
            return bound('fsync', writes.position, () => handle.datasync());
          })
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
