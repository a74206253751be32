import type { S3ClientConfig } from '@aws-sdk/client-s3';

/**
 * The S3 client settings every party of the benchmark uses against s3rver:
 * the same as the service's store (src/storage/s3.ts), so no side gets an
 * easier or harder wire format than another.
 */
export const s3rverClientConfig = (endpoint: string) =>
  ({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  }) satisfies S3ClientConfig;
