// Resumable uploads in S3: each append adds parts to one multipart upload.
// S3 wants every part but the last to be at least 5 MiB, so the bytes an
// append ends with that do not fill a part are kept in the bucket as a small
// "tail" object (like @tus/s3-store's incomplete part), read back into the
// first part buffer by the next append: never on our disk, never in memory
// between requests. Part ETags live in the state (in our database), since
// not every S3 implementation has ListParts (s3rver has not).
import { GetObjectCommand } from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';
import { ObjectStoreError } from './object-store.js';
import { DEFAULT_DEADLINES, idleBounded, type StoreCallObserver } from './store-deadlines.js';
import type { AppendOptions, AppendResult, ResumableState } from './resumable.js';
import { abortParts, completeParts, deleteObject, isMissing, objectSize, PartWriter, putObject, storeError, type S3Bucket, type SharedPartBuffers } from './s3-parts.js';

/** The S3 store's ResumableState. */
interface S3Resumable {
  /** Bytes per part, fixed for the upload: every part but the last has this size. */
  partSize: number;
  /** The multipart upload, created with the first full part. */
  uploadId?: string;
  /** ETags of the stored parts, part 1 first. */
  etags: string[];
  /**
   * Bytes after the last part, in the tail object of this slot. Appends
   * write the other slot, so the saved state's tail is never overwritten by
   * an append whose state is not saved.
   */
  tail?: { slot: 0 | 1; size: number };
}

export interface S3ResumableContext extends S3Bucket {
  partsInFlight: number;
  shared?: SharedPartBuffers;
  /** Milliseconds a read of a tail may wait for its next bytes. */
  readIdleMs?: number;
  /** Told of each read's outcome, as the store's other calls are (metrics, /readyz). */
  observe?: StoreCallObserver;
}

const tailKey = (key: string, slot: 0 | 1) => `${key}.tail${slot}`;

/** The upload a key belongs to: a tail's upload (tailKey's inverse), else the key itself. */
export const uploadOfKey = (key: string) => key.replace(/\.tail[01]$/, '');

function parse(state: ResumableState): S3Resumable {
  const parsed = state as unknown as S3Resumable;
  if (typeof parsed.partSize !== 'number' || !Array.isArray(parsed.etags)) throw new Error('not an S3 resumable state');
  return parsed;
}

/** Reads a whole small object into `into`; returns its length. */
async function readInto(ctx: S3ResumableContext, key: string, into: Buffer): Promise<number> {
  const res = await ctx.client.send(new GetObjectCommand({ Bucket: ctx.bucket, Key: key })).catch(storeError('reading the tail of an upload'));
  let length = 0;
  try {
    for await (const chunk of idleBounded(res.Body as Readable, 'get_object', ctx.readIdleMs ?? DEFAULT_DEADLINES.readIdleMs, ctx.observe)) {
      if (length + chunk.length > into.length) throw new ObjectStoreError(`the tail ${key} is larger than a part`);
      length += chunk.copy(into, length);
    }
  } catch (err) {
    if (err instanceof ObjectStoreError) throw err;
    throw new ObjectStoreError('reading the tail of an upload failed', { cause: err });
  }
  return length;
}

const deleteTails = (ctx: S3ResumableContext, key: string) => Promise.all(([0, 1] as const).map((slot) => deleteObject(ctx, tailKey(key, slot))));

export function startS3Resumable(partSize: number): ResumableState {
  return { partSize, etags: [] } satisfies S3Resumable as unknown as ResumableState;
}

export async function appendS3Resumable(
  ctx: S3ResumableContext,
  key: string,
  state: ResumableState,
  body: AsyncIterable<Buffer>,
  options: AppendOptions,
): Promise<AppendResult> {
  const s3State = parse(state);
  const stored = s3State.etags.length * s3State.partSize + (s3State.tail?.size ?? 0);
  if (stored !== options.offset) throw new Error(`resumable state holds ${stored} bytes, not the offset ${options.offset}`);
  let saved = false;
  const writer = new PartWriter({
    ...ctx,
    key,
    partSize: s3State.partSize,
    uploadId: s3State.uploadId,
    firstPart: s3State.etags.length + 1,
    onCreated: async (uploadId) => {
      await options.onState?.({ ...s3State, uploadId } as unknown as ResumableState);
      saved = true;
    },
  });
  // The tail goes first into the first part, read when there is something
  // to put after it, or when the upload ends here and it is the last part.
  let tailRead = !s3State.tail;
  const readTail = async () => {
    if (tailRead) return;
    tailRead = true;
    writer.filled = await readInto(ctx, tailKey(key, s3State.tail!.slot), writer.buffer);
    if (writer.filled !== s3State.tail!.size) throw new ObjectStoreError(`the tail of ${key} has ${writer.filled} bytes, not ${s3State.tail!.size}`);
  };
  let received = 0;
  let interrupted: unknown;
  try {
    try {
      for await (const chunk of body) {
        await readTail();
        await writer.write(chunk);
        received += chunk.length;
      }
    } catch (err) {
      // The store's own failures end the append; the body's are an interruption.
      if (err instanceof ObjectStoreError) throw err;
      interrupted = err ?? new Error('the body ended early');
    }
    const offset = options.offset + received;
    // The end of the upload: what is left is its last part, which may be short.
    const last = offset === options.length && writer.uploadId !== undefined;
    // Nothing came and nothing ends: the saved state stands as it is.
    if (received === 0 && !(last && s3State.tail)) return { state, offset, interrupted };
    await readTail();
    let tail: S3Resumable['tail'];
    if (last) {
      if (writer.filled > 0) await writer.sendFilled();
    } else if (writer.filled > 0) {
      const slot = s3State.tail?.slot === 0 ? 1 : 0;
      await putObject(ctx, tailKey(key, slot), writer.filledBytes, 'storing the tail of an upload');
      tail = { slot, size: writer.filled };
    }
    await writer.drain();
    const next: S3Resumable = { partSize: s3State.partSize, uploadId: writer.uploadId, etags: [...s3State.etags, ...writer.etags], tail };
    return { state: next as unknown as ResumableState, offset, interrupted };
  } catch (err) {
    await writer.settle();
    // A multipart upload this append created whose id never reached the
    // saved state: nothing else knows it, so it goes now.
    if (writer.uploadId && !s3State.uploadId && !saved) {
      await abortParts(ctx, key, writer.uploadId).catch(() => {});
    }
    throw err;
  }
}

export async function completeS3Resumable(ctx: S3ResumableContext, key: string, state: ResumableState, offset: number): Promise<void> {
  const s3State = parse(state);
  const done = async () => (await objectSize(ctx, key).catch(() => undefined)) === offset;
  if (s3State.uploadId) {
    if (s3State.tail) throw new Error('completing an upload whose last part was never sent');
    try {
      await completeParts(ctx, key, s3State.uploadId, s3State.etags);
    } catch (err) {
      // Completed before (a retry after the answer was lost): the upload is
      // gone (NoSuchUpload; s3rver answers InternalError) and the object is there.
      if (!(await done())) throw err;
    }
  } else {
    // Smaller than one part: the object is the tail, copied through memory (at most one part).
    const body = Buffer.allocUnsafeSlow(s3State.tail?.size ?? 0);
    let length = 0;
    try {
      if (s3State.tail) length = await readInto(ctx, tailKey(key, s3State.tail.slot), body);
    } catch (err) {
      if (!(isMissing((err as Error).cause) && (await done()))) throw err;
      length = -1;
    }
    if (length >= 0) {
      if (length !== offset) throw new ObjectStoreError(`the tail of ${key} has ${length} bytes, not ${offset}`);
      await putObject(ctx, key, body.subarray(0, length));
    }
  }
  await deleteTails(ctx, key);
}

export async function discardS3Resumable(ctx: S3ResumableContext, key: string, state: ResumableState): Promise<void> {
  const s3State = parse(state);
  if (s3State.uploadId) await abortParts(ctx, key, s3State.uploadId);
  await deleteTails(ctx, key);
  await deleteObject(ctx, key);
}
