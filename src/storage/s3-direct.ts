// Uploads straight to S3 (src/storage/direct.ts): the multipart upload is
// started, listed and completed through the store's client (its deadlines
// and retries), and the part URLs are signed for the endpoint clients reach
// (S3_PUBLIC_ENDPOINT), as the download offload's are.
import { CompleteMultipartUploadCommand, CreateMultipartUploadCommand, ListPartsCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { DirectStore, StoredPart } from './direct.js';
import { UploadGoneError } from './direct.js';
import { isMissing, storeError, type S3Bucket } from './s3-parts.js';
import { S3_LIMITS } from './s3-upload.js';
import type { PresignerOptions } from './s3-presign.js';

/** Parts per ListParts page: S3's most. */
const PAGE = 1000;

export function s3DirectStore(bucket: S3Bucket, signing: PresignerOptions): DirectStore {
  // Signing is local: this client never sends a request.
  const signer = new S3Client({
    endpoint: signing.publicEndpoint,
    region: signing.region,
    credentials: signing.credentials,
    forcePathStyle: signing.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const { client } = bucket;
  return {
    limits: { minPartSize: S3_LIMITS.minPartSize, maxPartSize: S3_LIMITS.maxPartSize, maxParts: S3_LIMITS.maxParts },
    async start(key) {
      const res = await client
        .send(new CreateMultipartUploadCommand({ Bucket: bucket.bucket, Key: key, ContentType: 'application/octet-stream' }))
        .catch(storeError('starting a multipart upload'));
      if (!res.UploadId) throw new Error('the store started a multipart upload without an id');
      return res.UploadId;
    },
    signPart(key, uploadId, partNumber, size, seconds) {
      // ContentLength is a signed header of the URL (content-length in
      // X-Amz-SignedHeaders): a body of another length fails the signature.
      const command = new UploadPartCommand({ Bucket: bucket.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, ContentLength: size });
      return getSignedUrl(signer, command, { expiresIn: seconds, signableHeaders: new Set(['content-length']) });
    },
    async parts(key, uploadId) {
      const parts: StoredPart[] = [];
      for (let marker: string | undefined; ; ) {
        const res = await client
          .send(new ListPartsCommand({ Bucket: bucket.bucket, Key: key, UploadId: uploadId, MaxParts: PAGE, PartNumberMarker: marker }))
          .catch((err: unknown) => {
            if (isMissing(err, ['NoSuchUpload'])) throw new UploadGoneError(key);
            return storeError('listing the parts of an upload')(err);
          });
        for (const p of res.Parts ?? []) parts.push({ partNumber: p.PartNumber ?? 0, size: p.Size ?? 0, etag: p.ETag ?? '' });
        if (!res.IsTruncated || res.NextPartNumberMarker === undefined) return parts.sort((a, b) => a.partNumber - b.partNumber);
        marker = res.NextPartNumberMarker;
      }
    },
    async complete(key, uploadId, parts) {
      await client
        .send(
          new CompleteMultipartUploadCommand({
            Bucket: bucket.bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) },
          }),
        )
        .catch((err: unknown) => {
          if (isMissing(err, ['NoSuchUpload'])) throw new UploadGoneError(key);
          return storeError('completing the multipart upload')(err);
        });
    },
  };
}
