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
import { ObjectStoreError } from './object-store.js';

export interface StreamUploadOptions {
  client: S3Client;
  bucket: string;
  key: string;
  body: Readable;
  /** Bytes per part; every part but the last has exactly this size. */
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
 * Streams `body` into one object. Bytes are copied into at most
 * partsInFlight + 1 part buffers, allocated once and reused, so an upload of
 * any size holds a fixed (partsInFlight + 1) x partSize: lib-storage
 * concatenates each part afresh and its garbage showed up as 30-60 MiB more
 * peak RSS per upload (README, Memory). A body shorter than one part becomes
 * a single PutObject.
 *
 * Errors of the body (too large, client gone) are rethrown as they are;
 * failures of the store become ObjectStoreError. Either way the multipart
 * upload is aborted before this rejects.
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

  let buffer: Buffer = Buffer.allocUnsafeSlow(partSize);
  let filled = 0;
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
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
