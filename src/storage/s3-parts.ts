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
 * Copies bytes into fixed part buffers, allocated once and reused, and sends
 * each full buffer as one part of a multipart upload. A new buffer is taken
 * only once fewer than partsInFlight parts are on their way, so a writer
 * holds at most partsInFlight buffers however much it writes (one being
 * filled while up to partsInFlight - 1 are sent). put() (s3-upload.ts) and
 * the resumable appends (s3-resumable.ts) both write through it.
 */
export class PartWriter {
  uploadId: string | undefined;
  /** How much of the part being filled is. */
  filled = 0;
  /** ETags of the parts this writer sent, in part order from firstPart. */
  readonly etags: string[] = [];
  private readonly spare: Buffer[] = [];
  private current: Buffer | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private failure: unknown;
  private next: number;

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
    const { client, bucket, key, partsInFlight } = this.options;
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
        this.spare.push(buffer); // only now may the buffer be filled again
      }, storeError(`uploading part ${PartNumber}`))
      .catch((err: unknown) => void (this.failure ??= err))
      .finally(() => this.inFlight.delete(sending));
    this.inFlight.add(sending);
    this.filled = 0;
    // Only once fewer than partsInFlight parts are on their way does the
    // next write take a buffer: one sent and returned is reused rather than
    // a new one made.
    while (this.inFlight.size >= partsInFlight && !this.failure) await Promise.race(this.inFlight);
    if (this.failure) throw this.failure;
  }

  /** Waits for every part on its way; rejects with the first failure. */
  async drain(): Promise<void> {
    await Promise.all(this.inFlight);
    if (this.failure) throw this.failure;
  }

  /** Waits for parts on their way, ignoring failures (before giving up on the upload). */
  async settle(): Promise<void> {
    await Promise.allSettled(this.inFlight);
  }
}
