import { STATUS_CODES } from 'node:http';
import { S3ServiceException } from '@aws-sdk/client-s3';

/** What to check for the S3 errors an operator meets at start. */
const HINTS: Record<string, string> = {
  SignatureDoesNotMatch: 'check S3_SECRET_ACCESS_KEY',
  InvalidAccessKeyId: 'check S3_ACCESS_KEY_ID',
  AccessDenied: 'the credentials are valid but may not use this bucket',
};

/**
 * The cause of an S3 failure in a few words: HTTP status and error code
 * ("403 SignatureDoesNotMatch"), or the network error. Not the SDK's message:
 * stores whose error XML has no <Message> (Ceph RGW 16) make it "UnknownError".
 */
export function describeS3Error(err: unknown): string {
  if (err instanceof S3ServiceException) {
    const status = err.$metadata.httpStatusCode;
    // Without a body (a HEAD request) the SDK knows only the status.
    const code = err.name && err.name !== 'Unknown' && err.name !== String(status) ? err.name : STATUS_CODES[status ?? 0];
    const hint = HINTS[err.name];
    return [status, code].filter(Boolean).join(' ') + (hint ? ` (${hint})` : '');
  }
  // A refused connection to a name with several addresses is an AggregateError with no message.
  if (err instanceof Error) return err.message || (err as NodeJS.ErrnoException).code || err.name;
  return String(err);
}
