import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';
import { ObjectStoreError, ObjectTooLargeError } from './object-store.js';

const MiB = 1024 * 1024;

/** What S3 accepts (AWS's published limits; MinIO and Ceph RGW enforce the same). */
export const S3_LIMITS = {
  /** Largest object. */
  maxObjectSize: 5 * 1024 * 1024 * MiB,
  /** Largest part. */
  maxPartSize: 5 * 1024 * MiB,
  /** Smallest part but the last (a store refuses to complete an upload with a smaller one: 400 EntityTooSmall). */
  minPartSize: 5 * MiB,
  /** Most parts in one multipart upload. */
  maxParts: 10_000,
} as const;

export interface StreamUploadOptions {
  client: S3Client;
  bucket: string;
  key: string;
  body: Readable;
  /** Bytes per part; every part but the last has exactly this size (S3_LIMITS: 5 MiB to 5 GiB). */
  partSize: number;
  /** Parts sent at once. */
  partsInFlight: number;
  /** Called with the multipart upload's id once S3 has created it; awaited before the first part. */
  onMultipartStart?: (uploadId: string) => void | Promise<void>;
}

const storeError = (what: string) => (err: unknown) => {
  throw new ObjectStoreError(`${what} failed`, { cause: err });
};

/**
 * Streams `body` into one object. Bytes are copied into part buffers,
 * allocated once and reused: one being filled while up to partsInFlight - 1
 * are sent (the loop waits for a send to finish before it fills another), so
 * an upload of any size holds at most partsInFlight x partSize. lib-storage
 * concatenates each part afresh and its garbage showed up as 30-60 MiB more
 * peak RSS per upload (README, Memory). A body shorter than one part becomes
 * a single PutObject.
 *
 * A body that would need more than S3_LIMITS.maxParts parts, or be larger
 * than S3_LIMITS.maxObjectSize, fails with ObjectTooLargeError before the
 * first byte past the limit is sent.
 *
 * Errors of the body (too large, client gone) are rethrown as they are;
 * failures of the store become ObjectStoreError. Either way the multipart
 * upload is aborted before this rejects (if the store is down that abort
 * fails too, silently: the caller's discard() is the one that reports it).
 */
export async function uploadStream(options: StreamUploadOptions): Promise<{ size: number }> {
  const { client, bucket, key, body, partSize, partsInFlight } = options;
  const spare: Buffer[] = [];
  const inFlight = new Set<Promise<void>>();
  const parts: CompletedPart[] = [];
  let failure: unknown;
  let uploadId: string | undefined;
  let partNumber = 0;

  const sendPart = async (buffer: Buffer, length: number) => {
    if (!uploadId) {
      uploadId = await client
        .send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: 'application/octet-stream' }))
        .then((res) => res.UploadId!, storeError('starting a multipart upload'));
      await options.onMultipartStart?.(uploadId);
    }
    const PartNumber = ++partNumber;
    const sending: Promise<void> = client
      .send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber, Body: buffer.subarray(0, length), ContentLength: length }))
      .then((res) => {
        parts.push({ PartNumber, ETag: res.ETag });
        spare.push(buffer); // only now may the buffer be filled again
      }, storeError(`uploading part ${PartNumber}`))
      .catch((err: unknown) => void (failure ??= err))
      .finally(() => inFlight.delete(sending));
    inFlight.add(sending);
    while (inFlight.size >= partsInFlight && !failure) await Promise.race(inFlight);
    if (failure) throw failure;
  };

  const maxSize = Math.min(partSize * S3_LIMITS.maxParts, S3_LIMITS.maxObjectSize);
  let buffer: Buffer = Buffer.alloc(0);
  let filled = 0;
  let size = 0;
  try {
    if (!(partSize >= 1 && partSize <= S3_LIMITS.maxPartSize)) throw new RangeError(`part size ${partSize} is outside 1..${S3_LIMITS.maxPartSize}`);
    buffer = Buffer.allocUnsafeSlow(partSize);
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (size + chunk.length > maxSize) throw new ObjectTooLargeError(maxSize);
      for (let offset = 0; offset < chunk.length; ) {
        const copied = chunk.copy(buffer, filled, offset);
        offset += copied;
        filled += copied;
        if (filled === partSize) {
          await sendPart(buffer, filled);
          buffer = spare.pop() ?? Buffer.allocUnsafeSlow(partSize);
          filled = 0;
        }
      }
      size += chunk.length;
    }
    if (partNumber === 0) {
      await client
        .send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: buffer.subarray(0, filled), ContentLength: filled, ContentType: 'application/octet-stream' }))
        .catch(storeError('storing the object'));
      return { size };
    }
    if (filled > 0) await sendPart(buffer, filled);
    await Promise.all(inFlight);
    if (failure) throw failure;
    parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
    await client
      .send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }))
      .catch(storeError('completing the multipart upload'));
    return { size };
  } catch (err) {
    // Stop reading; what was read is discarded with the upload.
    if (!body.destroyed) body.destroy();
    await Promise.allSettled(inFlight);
    if (uploadId) {
      // If the store is down this fails too: the upload stays open until the
      // store's own expiry of incomplete uploads (or a sweep) removes it.
      await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId })).catch(() => {});
    }
    throw err;
  }
}
