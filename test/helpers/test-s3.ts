// The S3 the tests run against: s3rver in this process by default, or a real
// S3 (Ceph RGW in CI, see .ci/rgw-suites.sh) when TEST_S3_ENDPOINT is set:
//
//   TEST_S3_ENDPOINT           http://127.0.0.1:4200
//   TEST_S3_ACCESS_KEY_ID      TEST_S3_SECRET_ACCESS_KEY (both required with an endpoint)
//   TEST_S3_REGION             us-east-1 unless set
//   TEST_S3_STOP, TEST_S3_START  shell commands that stop and start the store,
//                              for the fault tests (they fail without them)
//   TEST_S3_PAUSE, TEST_S3_RESUME  shell commands that freeze the store with
//                              its connections open (SIGSTOP) and let it go on
//                              (SIGCONT), for test/real-s3's late writes
//
// A real store keeps its data between runs, so every bucket a test uses comes
// from bucket(): a name of this run's own, emptied (objects and open
// multipart uploads) and removed by close().
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import type { ObjectStore, OpenUpload } from '../../src/storage/object-store.js';
import type { S3StoreOptions } from '../../src/storage/s3.js';
import { S3_CREDENTIALS, startS3rver } from './s3rver.js';

export interface TestS3 {
  /** 's3rver' (in this process) or 'external' (TEST_S3_ENDPOINT). */
  kind: 's3rver' | 'external';
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** A new bucket name, of this run only (`base`, a random suffix, a counter); close() empties and removes it. */
  bucket(base: string): string;
  /** Environment that points the server at this store and `bucket`. */
  env(bucket: string): Record<string, string>;
  /** Options for an S3ObjectStore on `bucket` (5 MiB parts, 2 in flight unless overridden). */
  storeOptions(bucket: string, overrides?: Partial<S3StoreOptions>): S3StoreOptions;
  /** Stops answering: every open connection is cut. */
  stop(): Promise<void>;
  /** Answers again, with the same data. */
  start(): Promise<void>;
  /** Freezes the store with its connections open: requests queue, unanswered (TEST_S3_PAUSE; a real store only). */
  pause(): Promise<void>;
  /** Lets a paused store go on: it runs what it queued. */
  resume(): Promise<void>;
  close(): Promise<void>;
}

const MiB = 1024 * 1024;

/** Every open upload of a store, all pages. */
export async function allOpenUploads(store: ObjectStore): Promise<OpenUpload[]> {
  const all: OpenUpload[] = [];
  for await (const page of store.openUploads()) all.push(...page);
  return all;
}

export async function startTestS3(): Promise<TestS3> {
  const endpoint = process.env.TEST_S3_ENDPOINT;
  if (!endpoint) return fromS3rver();
  const accessKeyId = process.env.TEST_S3_ACCESS_KEY_ID;
  const secretAccessKey = process.env.TEST_S3_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) throw new Error('TEST_S3_ENDPOINT needs TEST_S3_ACCESS_KEY_ID and TEST_S3_SECRET_ACCESS_KEY');
  return fixture({
    kind: 'external',
    endpoint,
    region: process.env.TEST_S3_REGION || 'us-east-1',
    credentials: { accessKeyId, secretAccessKey },
    stop: async () => run('TEST_S3_STOP'),
    start: async () => run('TEST_S3_START'),
    pause: async () => run('TEST_S3_PAUSE'),
    resume: async () => run('TEST_S3_RESUME'),
    close: async () => {},
  });
}

async function fromS3rver(): Promise<TestS3> {
  const s3 = await startS3rver();
  const paused = async () => {
    throw new Error('s3rver cannot be paused: test/real-s3 runs on a real store (TEST_S3_PAUSE)');
  };
  return fixture({ kind: 's3rver', endpoint: s3.endpoint, region: 'us-east-1', credentials: S3_CREDENTIALS, stop: s3.stop, start: s3.start, pause: paused, resume: paused, close: s3.close });
}

function run(variable: 'TEST_S3_STOP' | 'TEST_S3_START' | 'TEST_S3_PAUSE' | 'TEST_S3_RESUME'): void {
  const command = process.env[variable];
  if (!command) throw new Error(`${variable} is not set: this test stops and starts the store at TEST_S3_ENDPOINT`);
  execSync(command, { stdio: ['ignore', 'ignore', 'inherit'], timeout: 60_000 });
}

type Base = Pick<TestS3, 'kind' | 'endpoint' | 'region' | 'credentials' | 'stop' | 'start' | 'pause' | 'resume' | 'close'>;

function fixture(base: Base): TestS3 {
  const run = randomBytes(4).toString('hex');
  const buckets = new Set<string>();
  return {
    ...base,
    bucket(name) {
      const bucket = `${name}-${run}-${buckets.size + 1}`;
      buckets.add(bucket);
      return bucket;
    },
    env: (bucket) => ({
      S3_ENDPOINT: base.endpoint,
      S3_BUCKET: bucket,
      S3_REGION: base.region,
      S3_ACCESS_KEY_ID: base.credentials.accessKeyId,
      S3_SECRET_ACCESS_KEY: base.credentials.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
    }),
    storeOptions: (bucket, overrides = {}) => ({
      endpoint: base.endpoint,
      bucket,
      region: base.region,
      credentials: base.credentials,
      forcePathStyle: true,
      partSize: 5 * MiB,
      partsInFlight: 2,
      ...overrides,
    }),
    async close() {
      if (base.kind === 'external') await removeBuckets(base, [...buckets]);
      await base.close();
    },
  };
}

/** Empties and removes the buckets: objects, then open multipart uploads, then the bucket. Missing ones are skipped. */
async function removeBuckets(base: Base, buckets: string[]): Promise<void> {
  const client = new S3Client({ endpoint: base.endpoint, region: base.region, credentials: base.credentials, forcePathStyle: true });
  const missing = (err: { name?: string }) => {
    if (err.name !== 'NoSuchBucket') throw err;
  };
  try {
    for (const Bucket of buckets) {
      for (let token: string | undefined, more = true; more; ) {
        const page = await client.send(new ListObjectsV2Command({ Bucket, ContinuationToken: token })).catch(missing);
        for (const o of page?.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket, Key: o.Key }));
        token = page?.NextContinuationToken;
        more = Boolean(page?.IsTruncated && token);
      }
      for (let more = true; more; ) {
        const page = await client.send(new ListMultipartUploadsCommand({ Bucket })).catch(missing);
        for (const u of page?.Uploads ?? []) await client.send(new AbortMultipartUploadCommand({ Bucket, Key: u.Key, UploadId: u.UploadId }));
        more = Boolean(page?.IsTruncated && page.Uploads?.length);
      }
      await client.send(new DeleteBucketCommand({ Bucket })).catch(missing);
    }
  } finally {
    client.destroy();
  }
}
