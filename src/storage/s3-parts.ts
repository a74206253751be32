// The S3 calls the plain uploads (s3-upload.ts), the resumable ones
// (s3-resumable.ts) and the store (s3.ts) share: the part writer, and the
// object and multipart-upload commands with the errors they tolerate.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3ServiceException,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { ObjectStoreError } from './object-store.js';

/** A bucket, through a client: what every S3 call below needs. */
export interface S3Bucket {
  client: S3Client;
  bucket: string;
}

interface PartWriterOptions {
  client: S3Client;
  bucket: string;
  key: string;
  /** Bytes per part; every part but an upload's last has exactly this size. */
  partSize: number;
  /** Parts sent at once. */
  partsInFlight: number;
  /**
   * Where buffers beyond the writer's first come from. Absent: the writer
   * makes its own, up to partsInFlight.
   */
  shared?: SharedPartBuffers;
  /** The multipart upload to add to; absent: one is created before the first part. */
  uploadId?: string;
  /** Number of the first part this writer sends (parts before it are already stored). */
  firstPart: number;
  /** Awaited once a new multipart upload exists, before its first part is sent. */
  onCreated?: (uploadId: string) => Promise<void>;
}

export const storeError = (what: string) => (err: unknown) => {
  throw new ObjectStoreError(`${what} failed`, { cause: err });
};

/** Whether S3 says the object is not there (or, with `codes`, the upload). */
export const isMissing = (err: unknown, codes: readonly string[] = ['NoSuchKey', 'NotFound']) =>
  err instanceof S3ServiceException && (codes.includes(err.name) || err.$metadata.httpStatusCode === 404);

/** One object from one buffer. */
export async function putObject({ client, bucket }: S3Bucket, key: string, body: Buffer, what = 'storing the object'): Promise<void> {
  await client
    .send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: body.length, ContentType: 'application/octet-stream' }))
    .catch(storeError(what));
}

/** Completes a multipart upload of the parts whose ETags are `etags`, part 1 first. */
export async function completeParts({ client, bucket }: S3Bucket, key: string, uploadId: string, etags: readonly string[]): Promise<void> {
  await client
    .send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId: uploadId,
        MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) },
      }),
    )
    .catch(storeError('completing the multipart upload'));
}

/** Aborts a multipart upload; one already aborted (or completed) is what was wanted. */
export async function abortParts({ client, bucket }: S3Bucket, key: string, uploadId: string): Promise<void> {
  await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId })).catch((err: unknown) => {
    if (!isMissing(err, ['NoSuchUpload'])) throw new ObjectStoreError('aborting a multipart upload failed', { cause: err });
  });
}

/** Deletes an object; one not there is what was wanted. */
export async function deleteObject({ client, bucket }: S3Bucket, key: string): Promise<void> {
  await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })).catch((err: unknown) => {
    if (!isMissing(err)) throw new ObjectStoreError('deleting from the object store failed', { cause: err });
  });
}

/** The object's size, undefined when it is not there. */
export async function objectSize({ client, bucket }: S3Bucket, key: string): Promise<number | undefined> {
  try {
    const res = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return res.ContentLength ?? 0;
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw new ObjectStoreError('reading from the object store failed', { cause: err });
  }
}

/**
 * Part buffers beyond each upload's first, shared by the uploads of one
 * store. An upload always has one buffer of its own, so it never waits on
 * another; while a part of it is on its way it fills a second only when one
 * is free here. Thirty-two uploads then hold 32 + count buffers instead of
 * 32 x partsInFlight (the second buffer is what lets one upload read while
 * it sends; with many at once the store is the bottleneck anyway).
 *
 * Buffers come back here when their part is sent and are reused; once none
 * has been lent for idleMs they are dropped, so memory taken by a burst goes
 * back after it.
 */
export class SharedPartBuffers {
  private readonly free: Buffer[] = [];
  private lent = 0;
  private idle: NodeJS.Timeout | undefined;

  constructor(
    /** Bytes per buffer; writers with another part size make their own. */
    readonly size: number,
    /** Buffers at most, lent or free. */
    readonly count: number,
    private readonly idleMs = 10_000,
  ) {}

  /** A buffer of `size` bytes, or undefined when every one is lent (or `size` is not this pool's). */
  take(size: number): Buffer | undefined {
    if (size !== this.size || this.lent >= this.count) return undefined;
    this.lent += 1;
    clearTimeout(this.idle);
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.size);
  }

  give(buffer: Buffer): void {
    this.lent -= 1;
    this.free.push(buffer);
    if (this.lent === 0) {
      clearTimeout(this.idle);
      this.idle = setTimeout(() => void this.free.splice(0), this.idleMs).unref();
    }
  }

  /** Buffers lent now (for tests and metrics). */
  get inUse(): number {
    return this.lent;
  }
}

/**
 * Copies bytes into fixed part buffers, allocated once and reused, and sends
 * each full buffer as one part of a multipart upload. A new buffer is taken
 * only once fewer than partsInFlight parts are on their way, so a writer
 * holds at most partsInFlight buffers however much it writes (one being
 * filled while up to partsInFlight - 1 are sent). With `shared`, only the
 * first is its own and the others are lent by the pool while their part is
 * sent. put() (s3-upload.ts) and the resumable appends (s3-resumable.ts)
 * both write through it; both end with drain() or settle(), which give lent
 * buffers back.
 */
export class PartWriter {
  uploadId: string | undefined;
  /** How much of the part being filled is. */
  filled = 0;
  /** ETags of the parts this writer sent, in part order from firstPart. */
  readonly etags: string[] = [];
  /** Buffers ready to be filled: the writer's own, or one lent to fill next. */
  private readonly spare: Buffer[] = [];
  /** Buffers lent by options.shared, wherever they are now. */
  private readonly lent = new Set<Buffer>();
  private current: Buffer | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private failure: unknown;
  private next: number;
  /** filledBytes was read: the part being filled is no longer moved out of a lent buffer. */
  private handedOut = false;

  constructor(private readonly options: PartWriterOptions) {
    this.uploadId = options.uploadId;
    this.next = options.firstPart;
  }

  /**
   * The part being filled, taken when the first byte comes: a writer whose
   * body is empty, or that has just sent its last part, holds no buffer.
   */
  get buffer(): Buffer {
    return (this.current ??= this.spare.pop() ?? Buffer.allocUnsafeSlow(this.options.partSize));
  }

  /** The bytes of the part being filled. */
  get filledBytes(): Buffer {
    // Its caller sends these bytes: the buffer must stay where it is until drain() or settle().
    this.handedOut = true;
    return this.current ? this.current.subarray(0, this.filled) : Buffer.alloc(0);
  }

  /** Copies `chunk` in, sending every part it fills; waits while partsInFlight parts are on their way. */
  async write(chunk: Buffer): Promise<void> {
    const { partSize } = this.options;
    for (let offset = 0; offset < chunk.length; ) {
      const copied = chunk.copy(this.buffer, this.filled, offset);
      offset += copied;
      this.filled += copied;
      if (this.filled === partSize) await this.sendFilled();
    }
  }

  /** Sends what the buffer holds as the next part (the upload's last may be short). */
  async sendFilled(): Promise<void> {
    const { client, bucket, key } = this.options;
    if (this.failure) throw this.failure;
    if (!this.uploadId) {
      this.uploadId = await client
        .send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: 'application/octet-stream' }))
        .then((res) => res.UploadId!, storeError('starting a multipart upload'));
      await this.options.onCreated?.(this.uploadId);
    }
    const buffer = this.buffer;
    const length = this.filled;
    this.current = undefined; // the next write takes a buffer back from the sends, or a new one
    const PartNumber = this.next++;
    const index = PartNumber - this.options.firstPart;
    const sending: Promise<void> = client
      .send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: this.uploadId, PartNumber, Body: buffer.subarray(0, length), ContentLength: length }))
      .then((res) => {
        this.etags[index] = res.ETag!;
      }, storeError(`uploading part ${PartNumber}`))
      .catch((err: unknown) => void (this.failure ??= err))
      // Only now may the buffer be filled again (or lent to another writer).
      .finally(() => {
        this.inFlight.delete(sending);
        this.sent(buffer);
      });
    this.inFlight.add(sending);
    this.filled = 0;
    while (!this.failure && !this.nextBufferReady()) await Promise.race(this.inFlight);
    if (this.failure) throw this.failure;
  }

  /** Waits for every part on its way; rejects with the first failure. Gives lent buffers back. */
  async drain(): Promise<void> {
    await Promise.all(this.inFlight);
    this.giveAllBack();
    if (this.failure) throw this.failure;
  }

  /** Waits for parts on their way, ignoring failures (before giving up on the upload). Gives lent buffers back. */
  async settle(): Promise<void> {
    await Promise.allSettled(this.inFlight);
    this.giveAllBack();
  }

  /**
   * Whether the next write may take a buffer: fewer than partsInFlight parts
   * are on their way, and a buffer is free (without a pool, one may be made).
   */
  private nextBufferReady(): boolean {
    const { shared, partSize, partsInFlight } = this.options;
    if (this.inFlight.size >= partsInFlight) return false;
    if (this.spare.length > 0 || !shared) return true;
    const buffer = shared.take(partSize);
    if (!buffer) return false;
    this.lent.add(buffer);
    this.spare.push(buffer);
    return true;
  }

  private sent(buffer: Buffer): void {
    if (this.lent.has(buffer)) return this.giveBack(buffer);
    // The writer's own buffer is back, so no lent one is needed: one waiting
    // to be filled goes back, and so does the one being filled, its bytes
    // moved into the own buffer. A lent buffer is thus held only while a
    // part of this upload is on its way (which has a deadline), never for as
    // long as a stalled or trickling client takes to fill it.
    for (const waiting of this.spare.filter((b) => this.lent.has(b))) this.giveBack(waiting);
    const filling = this.current;
    if (filling && this.lent.has(filling) && !this.handedOut) {
      filling.copy(buffer, 0, 0, this.filled);
      this.current = buffer;
      this.lent.delete(filling);
      this.options.shared!.give(filling);
      return;
    }
    this.spare.push(buffer);
  }

  private giveBack(buffer: Buffer): void {
    const at = this.spare.indexOf(buffer);
    if (at >= 0) this.spare.splice(at, 1);
    if (this.current === buffer) {
      this.current = undefined;
      this.filled = 0;
    }
    this.lent.delete(buffer);
    this.options.shared!.give(buffer);
  }

  private giveAllBack(): void {
    for (const buffer of [...this.lent]) this.giveBack(buffer);
  }
}
