// Presigned GetObject URLs for downloads the store serves itself
// (S3_PRESIGNED_DOWNLOADS, docs/operating.md "Offloading downloads to the
// store"). Signed for the endpoint clients reach (S3_PUBLIC_ENDPOINT), which
// may differ from the one the server talks to: SigV4 signs the Host header,
// so a URL signed for minio:9000 fails at files.example.com.
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { PresignOptions } from './object-store.js';

export interface PresignerOptions {
  /** The endpoint clients reach; absent for AWS itself. */
  publicEndpoint?: string;
  bucket: string;
  region: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
  forcePathStyle: boolean;
}

/** Signs GetObject URLs; the client it holds never sends a request (signing is local). */
export function s3Presigner(options: PresignerOptions): (key: string, presign: PresignOptions) => Promise<string> {
  const client = new S3Client({
    endpoint: options.publicEndpoint,
    region: options.region,
    credentials: options.credentials,
    forcePathStyle: options.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return (key, { seconds, disposition, contentType }) =>
    getSignedUrl(
      client,
      new GetObjectCommand({ Bucket: options.bucket, Key: key, ResponseContentDisposition: disposition, ResponseContentType: contentType }),
      { expiresIn: seconds },
    );
}

/**
 * Signs the store's own GET of an object, for the pooled download path
 * (pooled-read.ts): a presigned URL for the endpoint the server talks to.
 * The URL never leaves the process; it lives 15 minutes, the clock skew
 * SigV4 tolerates, so a store's clock a little ahead does not refuse it.
 */
export function s3ReadSigner(options: Omit<PresignerOptions, 'publicEndpoint'> & { endpoint?: string }): (key: string) => Promise<string> {
  const client = new S3Client({
    endpoint: options.endpoint,
    region: options.region,
    credentials: options.credentials,
    forcePathStyle: options.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return (key) => getSignedUrl(client, new GetObjectCommand({ Bucket: options.bucket, Key: key }), { expiresIn: 900 });
}
