/**
 * The suites in test/real-s3 check what only a real S3 does (signatures,
 * part minimums, native ListMultipartUploads, lifecycle rules); against
 * s3rver they would test a fake. So they refuse to load without
 * TEST_S3_ENDPOINT, and `npm test` (.mocharc.json) leaves them out;
 * .ci/rgw-suites.sh runs them on Ceph RGW.
 */
export function requireRealS3(): void {
  if (!process.env.TEST_S3_ENDPOINT) {
    throw new Error('test/real-s3 needs a real S3: set TEST_S3_ENDPOINT and its credentials (see .ci/rgw-suites.sh)');
  }
}
