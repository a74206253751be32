import {
  GetBucketLifecycleConfigurationCommand,
  PutBucketLifecycleConfigurationCommand,
  S3ServiceException,
  type LifecycleRule,
  type S3Client,
} from '@aws-sdk/client-s3';
import { describeS3Error } from './s3-errors.js';

/** Our rule's ID, so a later start recognises (and may update) it. */
export const RULE_ID = 'dropstream-abort-incomplete-uploads';

/** Whether the bucket aborts incomplete multipart uploads by itself, and after how long. */
export type UploadExpiry = { rule: 'set' | 'present'; days: number } | { rule: 'none'; reason: string };

/** Applies to the whole bucket: no prefix, tag or size filter. */
function wholeBucket(rule: LifecycleRule): boolean {
  const legacyPrefix = (rule as { Prefix?: string }).Prefix ?? '';
  const filter = rule.Filter ?? {};
  return legacyPrefix === '' && (filter.Prefix ?? '') === '' && !filter.Tag && !filter.And && filter.ObjectSizeGreaterThan === undefined && filter.ObjectSizeLessThan === undefined;
}

const abortsUploads = (rule: LifecycleRule) =>
  rule.Status === 'Enabled' && rule.AbortIncompleteMultipartUpload?.DaysAfterInitiation !== undefined && wholeBucket(rule);

/**
 * Makes the bucket abort multipart uploads left incomplete for `days` (an
 * AbortIncompleteMultipartUpload lifecycle rule), so a crash between
 * creating an upload and recording it costs storage for `days` at most even
 * if no sweep ever runs. An operator's own rules are never rewritten: a
 * bucket that has any keeps them, and a whole-bucket abort rule among them
 * counts. Stores without lifecycle rules (s3rver), or with a different
 * expiry of their own (MinIO), and credentials that may not set them, are
 * not an error: the answer says why there is no rule.
 */
export async function ensureUploadExpiry(client: S3Client, bucket: string, days: number): Promise<UploadExpiry> {
  if (days === 0) return { rule: 'none', reason: 'S3_ABORT_INCOMPLETE_DAYS is 0' };
  let rules: LifecycleRule[];
  try {
    rules = (await client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules ?? [];
  } catch (err) {
    if (!(err instanceof S3ServiceException && err.name === 'NoSuchLifecycleConfiguration')) {
      return { rule: 'none', reason: `reading the bucket's lifecycle rules failed: ${describeS3Error(err)}` };
    }
    rules = [];
  }
  const ours = rules.find((r) => r.ID === RULE_ID);
  const theirs = rules.filter((r) => r.ID !== RULE_ID);
  const existing = theirs.find(abortsUploads) ?? (ours && abortsUploads(ours) ? ours : undefined);
  if (theirs.length > 0 || existing?.AbortIncompleteMultipartUpload?.DaysAfterInitiation === days) {
    if (existing) return { rule: 'present', days: existing.AbortIncompleteMultipartUpload!.DaysAfterInitiation! };
    return { rule: 'none', reason: 'the bucket has lifecycle rules of its own, none aborting incomplete uploads; left unchanged' };
  }
  try {
    await client.send(
      new PutBucketLifecycleConfigurationCommand({
        Bucket: bucket,
        LifecycleConfiguration: {
          Rules: [{ ID: RULE_ID, Status: 'Enabled', Filter: { Prefix: '' }, AbortIncompleteMultipartUpload: { DaysAfterInitiation: days } }],
        },
      }),
    );
  } catch (err) {
    return { rule: 'none', reason: `setting a lifecycle rule failed: ${describeS3Error(err)}` };
  }
  return { rule: 'set', days };
}
