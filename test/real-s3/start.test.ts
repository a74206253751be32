// Real S3 only (TEST_S3_ENDPOINT; CI runs these on Ceph RGW, .ci/rgw-suites.sh):
// what happens at start that s3rver cannot show. s3rver accepts any
// credentials and has no lifecycle rules.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetBucketLifecycleConfigurationCommand, PutBucketLifecycleConfigurationCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { RULE_ID } from '../../src/storage/s3-lifecycle.js';
import { createTestDatabase } from '../helpers/databases.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { requireRealS3 } from './require-real-s3.js';

requireRealS3();

/** `dropstream serve` until it exits (it must, here); its exit code and stderr. */
async function serveUntilExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'dropstream-real-s3-'));
  // PostgreSQL when there is one: a fresh PGlite spends seconds on migrations first.
  const db = process.env.TEST_DATABASE_URL ? await createTestDatabase() : undefined;
  try {
    const child = spawn(process.execPath, ['bin/dropstream.js', 'serve'], {
      env: { PATH: process.env.PATH, DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', LOG_LEVEL: 'silent', ...(db ? { DATABASE_URL: db.url } : {}), ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const [code] = await once(child, 'exit');
    clearTimeout(timer);
    return { code, stderr };
  } finally {
    await db?.drop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

describe('real S3: start', function () {
  this.timeout(90_000);
  let s3: TestS3;
  before(async () => {
    s3 = await startTestS3();
  });
  after(async () => {
    await s3.close();
  });

  describe('wrong credentials', () => {
    for (const [label, change, cause] of [
      ['a wrong secret key', { S3_SECRET_ACCESS_KEY: 'not-the-secret' }, '403 SignatureDoesNotMatch (check S3_SECRET_ACCESS_KEY)'],
      ['an unknown access key', { S3_ACCESS_KEY_ID: 'nobody' }, '403 InvalidAccessKeyId (check S3_ACCESS_KEY_ID)'],
    ] as const) {
      it(`when the server starts with ${label}, then it exits 1 with one line naming ${cause.split(' (')[0]}, and no stack`, async () => {
        const bucket = s3.bucket('creds');
        const { code, stderr } = await serveUntilExit({ ...s3.env(bucket), ...change });
        expect(code).to.equal(1);
        expect(stderr).to.equal(`dropstream: S3 cannot reach bucket: ${bucket} at ${s3.endpoint}: ${cause}\n`);
      });
    }
  });

  describe('the AbortIncompleteMultipartUpload lifecycle rule', () => {
    const lifecycle = async (store: S3ObjectStore, bucket: string) =>
      (await store.client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules ?? [];
    const withStore = async (days: number, work: (store: S3ObjectStore, bucket: string) => Promise<void>) => {
      const bucket = s3.bucket('lifecycle');
      const store = new S3ObjectStore(s3.storeOptions(bucket, { abortIncompleteDays: days }));
      try {
        await store.ensureBucket();
        await work(store, bucket);
      } finally {
        await store.close();
      }
    };

    it('when the bucket has no rules, then ours is set for the whole bucket, and found again on the next start', async () => {
      await withStore(7, async (store, bucket) => {
        expect(await store.ensureUploadExpiry()).to.deep.equal({ rule: 'set', days: 7 });
        const rules = await lifecycle(store, bucket);
        expect(rules).to.have.length(1);
        expect(rules[0]).to.deep.include({ ID: RULE_ID, Status: 'Enabled', AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 } });
        expect(await store.ensureUploadExpiry()).to.deep.equal({ rule: 'present', days: 7 });
      });
    });

    it('when S3_ABORT_INCOMPLETE_DAYS changes, then our rule follows it', async () => {
      await withStore(7, async (store, bucket) => {
        await store.ensureUploadExpiry();
        const again = new S3ObjectStore(s3.storeOptions(bucket, { abortIncompleteDays: 2 }));
        expect(await again.ensureUploadExpiry()).to.deep.equal({ rule: 'set', days: 2 });
        expect((await lifecycle(store, bucket))[0]!.AbortIncompleteMultipartUpload).to.deep.equal({ DaysAfterInitiation: 2 });
        await again.close();
      });
    });

    it('when the bucket has rules of its own, then they are left exactly as they were', async () => {
      await withStore(7, async (store, bucket) => {
        const theirs = { ID: 'expire-logs', Status: 'Enabled' as const, Filter: { Prefix: 'logs/' }, Expiration: { Days: 30 } };
        await store.client.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: [theirs] } }));
        const before = await lifecycle(store, bucket);
        const expiry = await store.ensureUploadExpiry();
        expect(expiry).to.deep.equal({ rule: 'none', reason: 'the bucket has lifecycle rules of its own, none aborting incomplete uploads; left unchanged' });
        expect(await lifecycle(store, bucket)).to.deep.equal(before);
      });
    });

    it('when the bucket has its own whole-bucket abort rule, then that one counts and nothing is written', async () => {
      await withStore(7, async (store, bucket) => {
        const theirs = { ID: 'ops-abort', Status: 'Enabled' as const, Filter: { Prefix: '' }, AbortIncompleteMultipartUpload: { DaysAfterInitiation: 3 } };
        await store.client.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: [theirs] } }));
        expect(await store.ensureUploadExpiry()).to.deep.equal({ rule: 'present', days: 3 });
        expect((await lifecycle(store, bucket)).map((r) => r.ID)).to.deep.equal(['ops-abort']);
      });
    });

    it('when S3_ABORT_INCOMPLETE_DAYS is 0, then no rule is set', async () => {
      await withStore(0, async (store, bucket) => {
        expect(await store.ensureUploadExpiry()).to.deep.equal({ rule: 'none', reason: 'S3_ABORT_INCOMPLETE_DAYS is 0' });
        const err = await store.client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket })).then(() => undefined, (e: Error) => e);
        expect(err?.name).to.equal('NoSuchLifecycleConfiguration');
      });
    });
  });
});
