import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { ObjectTooLargeError } from './object-store.js';
import { abortParts, completeParts, PartWriter, putObject, type SharedPartBuffers } from './s3-parts.js';

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
  /** Where buffers beyond the upload's first come from (PartWriter). */
  shared?: SharedPartBuffers;
  /** Called with the multipart upload's id once S3 has created it; awaited before the first part. */
  onMultipartStart?: (uploadId: string) => void | Promise<void>;
}

/**
 * Streams `body` into one object. Bytes are copied into part buffers
 * (PartWriter, s3-parts.ts, which the resumable appends share), allocated
 * once and reused: one being filled while up to partsInFlight - 1 are sent
 * (the writer waits for a send to finish before it fills another), so an
 * upload of any size holds at most partsInFlight x partSize. lib-storage
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
  const maxSize = Math.min(partSize * S3_LIMITS.maxParts, S3_LIMITS.maxObjectSize);
  let writer: PartWriter | undefined;
  let size = 0;
  try {
    if (!(partSize >= 1 && partSize <= S3_LIMITS.maxPartSize)) throw new RangeError(`part size ${partSize} is outside 1..${S3_LIMITS.maxPartSize}`);
    writer = new PartWriter({ client, bucket, key, partSize, partsInFlight, shared: options.shared, firstPart: 1, onCreated: async (id) => options.onMultipartStart?.(id) });
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (size + chunk.length > maxSize) throw new ObjectTooLargeError(maxSize);
      await writer.write(chunk);
      size += chunk.length;
    }
    if (!writer.uploadId) {
      await putObject({ client, bucket }, key, writer.filledBytes);
      return { size };
    }
    if (writer.filled > 0) await writer.sendFilled();
    await writer.drain();
    await completeParts({ client, bucket }, key, writer.uploadId, writer.etags);
    return { size };
  } catch (err) {
    // Stop reading; what was read is discarded with the upload.
    if (!body.destroyed) body.destroy();
    await writer?.settle();
    if (writer?.uploadId) {
      // If the store is down this fails too: the upload stays open until the
      // store's own expiry of incomplete uploads (or a sweep) removes it.
      await abortParts({ client, bucket }, key, writer.uploadId).catch(() => {});
    }
    throw err;
  }
}
