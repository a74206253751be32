// Real S3 only (TEST_S3_ENDPOINT; CI runs these on Ceph RGW, .ci/rgw-suites.sh):
// the store's behaviour that s3rver does not have. s3rver accepts parts
// under 5 MiB, answers `Range: bytes=0-0` with the whole object and has no
// ListMultipartUploads of its own (test/helpers/s3rver.ts emulates it).
import { randomBytes } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { CreateMultipartUploadCommand, GetObjectCommand, S3ServiceException } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.js';
import { newStorageKey } from '../../src/files/record.js';
import { ObjectStoreError, type OpenUpload } from '../../src/storage/object-store.js';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { S3_LIMITS, uploadStream } from '../../src/storage/s3-upload.js';
import { sleep } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { requireRealS3 } from './require-real-s3.js';

requireRealS3();

const MiB = 1024 * 1024;

describe('real S3: the store', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let bucket: string;
  let store: S3ObjectStore;
  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('real-store');
    store = new S3ObjectStore(s3.storeOptions(bucket));
    await store.ensureBucket();
  });
  after(async () => {
    await store?.close();
    await s3?.close();
  });

  describe('part sizes', () => {
    it('when a part other than the last is under 5 MiB, then the store refuses the upload (400 EntityTooSmall) and nothing is left', async () => {
      const key = newStorageKey();
      const err = await uploadStream({ client: store.client, bucket, key, body: Readable.from([randomBytes(9 * MiB)]), partSize: 4 * MiB, partsInFlight: 2 }).then(
        () => expect.fail('the store accepted a 4 MiB part'),
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(ObjectStoreError);
      expect((err as Error).message).to.equal('completing the multipart upload failed');
      const cause = (err as Error).cause as S3ServiceException;
      expect([cause.$metadata.httpStatusCode, cause.name]).to.deep.equal([400, 'EntityTooSmall']);
      expect(await store.head(key)).to.equal(undefined);
      expect(await allOpenUploads(store)).to.deep.equal([]);
    });

    it('when S3_PART_SIZE is under 5 MiB, then the configuration is refused, so no upload ever meets that refusal', () => {
      const env = { S3_BUCKET: 'uploads', S3_PART_SIZE: String(S3_LIMITS.minPartSize - 1) };
      expect(() => loadConfig(env)).to.throw(ConfigError, /S3_PART_SIZE: must be bytes from 5 MiB \(5242880\) to 5 GiB/);
      expect(loadConfig({ ...env, S3_PART_SIZE: String(S3_LIMITS.minPartSize) }).s3?.partSize).to.equal(5 * MiB);
    });

    it('when every part but the last is exactly 5 MiB, then the store accepts the upload byte for byte', async () => {
      const key = newStorageKey();
      const data = randomBytes(2 * 5 * MiB + 1);
      expect(await store.put(key, Readable.from([data]))).to.deep.equal({ size: data.length });
      const chunks: Buffer[] = [];
      for await (const chunk of await store.get(key)) chunks.push(chunk as Buffer);
      expect(Buffer.concat(chunks).equals(data)).to.equal(true);
    });
  });

  describe('ranges', () => {
    it('when bytes=0-0 is asked for, then the store itself answers one byte and get passes its stream through without slicing', async () => {
      const key = newStorageKey();
      const data = randomBytes(1000);
      await store.put(key, Readable.from([data]));
      const direct = await store.client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: 'bytes=0-0' }));
      expect([direct.ContentLength, direct.ContentRange]).to.deep.equal([1, 'bytes 0-0/1000']);
      (direct.Body as Readable).destroy();

      const stream = await store.get(key, { start: 0, end: 0 });
      // The slicing fallback (for stores that ignore Range) would be a Transform piped after the response.
      expect(stream).to.not.be.instanceOf(Transform);
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      expect(Buffer.concat(chunks).equals(data.subarray(0, 1))).to.equal(true);
    });
  });

  describe('open uploads (native ListMultipartUploads)', () => {
    it('when five uploads are open on three keys, then pages of two list each once, with when it was initiated', async () => {
      const listing = s3.bucket('listing');
      const lister = new S3ObjectStore(s3.storeOptions(listing));
      await lister.ensureBucket();
      const keys = [newStorageKey(), newStorageKey(), newStorageKey()];
      const started = Date.now();
      const created: OpenUpload[] = [];
      for (const key of [keys[0]!, keys[0]!, keys[1]!, keys[1]!, keys[2]!]) {
        const res = await lister.client.send(new CreateMultipartUploadCommand({ Bucket: listing, Key: key }));
        created.push({ key, uploadId: res.UploadId!, since: new Date() });
      }
      const pages: OpenUpload[][] = [];
      for await (const page of lister.openUploads({ pageSize: 2 })) pages.push(page);
      expect(pages.map((p) => p.length)).to.deep.equal([2, 2, 1]);
      const listed = pages.flat();
      expect(listed.map((u) => `${u.key} ${u.uploadId}`).sort()).to.deep.equal(created.map((u) => `${u.key} ${u.uploadId}`).sort());
      for (const u of listed) expect(u.since.getTime()).to.be.within(started - 5000, Date.now() + 5000);
      for (const u of listed) await lister.abortUpload(u);
      expect(await allOpenUploads(lister)).to.deep.equal([]);
      await lister.close();
    });
  });

  describe('the sweep against the store\'s own list', () => {
    let t: TestServer;
    let swept: S3ObjectStore;
    let sweptBucket: string;
    before(async () => {
      sweptBucket = s3.bucket('real-sweep');
      t = await startTestServer('pglite', { ...s3.env(sweptBucket), GC_INTERVAL: '0' });
      swept = new S3ObjectStore(s3.storeOptions(sweptBucket));
    });
    after(async () => {
      await swept?.close();
      await t?.close();
    });

    it('when uploads no record claims are older than the grace period, then they are aborted; one claimed by a record is left', async () => {
      const create = async (key: string) => (await swept.client.send(new CreateMultipartUploadCommand({ Bucket: sweptBucket, Key: key }))).UploadId!;
      const strays = [await create(newStorageKey()), await create(newStorageKey()), await create(newStorageKey())];
      const claimedKey = newStorageKey();
      const claimed = await create(claimedKey);
      await sleep(2100);
      // An upload in progress: its record is fresh (touched every minute), the upload in the store older.
      await t.server.db.prisma.pendingObject.create({ data: { storageKey: claimedKey, reason: 'upload', uploadId: claimed } });
      // The store's own list names all four before the sweep, and only the claimed one after it.
      expect((await allOpenUploads(swept)).map((u) => u.uploadId).sort()).to.deep.equal([...strays, claimed].sort());
      expect(await t.admin('POST', '/admin/gc', { grace_seconds: 2 })).to.deep.include({ uploads: 0, strays: 3, failed: 0 });
      expect((await allOpenUploads(swept)).map((u) => u.uploadId)).to.deep.equal([claimed]);
      // Once that upload is abandoned too (its record silent past the grace period), the record's pass aborts it.
      expect(await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 1, strays: 0, failed: 0 });
      expect(await allOpenUploads(swept)).to.deep.equal([]);
    });
  });
});
