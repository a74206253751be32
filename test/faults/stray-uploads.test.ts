// The sweep's store-side backstop: open uploads in the store that no pending
// record claims (a crash between the store creating an upload and our
// recording its id, or a record lost some other way) are aborted once older
// than the grace period; uploads in progress are claimed and never touched.
import { randomBytes } from 'node:crypto';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { CreateMultipartUploadCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { newStorageKey } from '../../src/files/record.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { BOUNDARY } from '../helpers/multipart.js';
import { testClock, type TestClock } from '../helpers/clock.js';
import { eventually, startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';

const MiB = 1024 * 1024;
const HOUR = 3600 * 1000;
/** The uploads' heartbeat here (a minute in service): well inside the 2 s grace the tests sweep with. */
const HEARTBEAT_MS = 300;

interface Setup {
  t: TestServer;
  /** The server's clock: moved past the grace period instead of waiting for it. */
  clock: TestClock;
  store: ObjectStore;
  /** An open upload in the store that no record knows of, started `ageMs` ago; returns its upload id. */
  stray(ageMs: number, key?: string): Promise<string>;
  close(): Promise<void>;
}

const setups: Record<string, () => Promise<Setup>> = {
  async local() {
    const clock = testClock();
    const t = await startTestServer('pglite', { GC_INTERVAL: '0', SHUTDOWN_TIMEOUT: '1' }, undefined, { uploadHeartbeatMs: HEARTBEAT_MS, clock });
    const store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
    return {
      t,
      clock,
      store,
      async stray(ageMs) {
        const uploadId = crypto.randomUUID();
        const path = join(t.dataDir, 'objects', '.tmp', uploadId);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, randomBytes(1000));
        const then = new Date(Date.now() - ageMs);
        await utimes(path, then, then);
        return uploadId;
      },
      close: () => t.close(),
    };
  },
  async s3() {
    const clock = testClock();
    const s3: TestS3 = await startTestS3();
    const bucket = s3.bucket('strays');
    const t = await startTestServer('pglite', { ...s3.env(bucket), S3_PART_SIZE: String(5 * MiB), GC_INTERVAL: '0', SHUTDOWN_TIMEOUT: '1' }, undefined, {
      uploadHeartbeatMs: HEARTBEAT_MS,
      clock,
    });
    const store = new S3ObjectStore(s3.storeOptions(bucket));
    return {
      t,
      clock,
      store,
      // A store sets the start time itself: "old" ones are made old by asking with a shorter grace.
      async stray(_ageMs, key = newStorageKey()) {
        return (await store.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }))).UploadId!;
      },
      async close() {
        await store.close();
        await t.close();
        await s3.close();
      },
    };
  },
};

for (const [name, setup] of Object.entries(setups)) {
  describe(`sweep: open uploads no record claims (${name} store)`, () => {
    let s: Setup;
    before(async () => {
      s = await setup();
      await s.t.account();
    });
    after(async () => {
      await s?.close();
    });

    const openIds = async () => (await allOpenUploads(s.store)).map((u) => u.uploadId).sort();

    it('when an unclaimed upload is younger than the grace period, then the sweep leaves it; once older, it is aborted', async () => {
      const id = await s.stray(0);
      expect(await s.t.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 0, strays: 0, failed: 0 });
      expect(await openIds()).to.deep.equal([id]);
      expect(await s.t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 0, strays: 1, failed: 0 });
      expect(await openIds()).to.deep.equal([]);
    });

    if (name === 'local') {
      it('when an unclaimed temp file has not been written for longer than GC_GRACE, then the scheduled grace aborts it', async () => {
        await s.stray(2 * HOUR);
        const fresh = await s.stray(0);
        expect(await s.t.admin('POST', '/admin/gc', {})).to.deep.include({ strays: 1 });
        expect(await openIds()).to.deep.equal([fresh]);
        await s.t.admin('POST', '/admin/gc', { grace_seconds: 0 });
      });
    }

    it('when an upload in progress started before the grace period, then its record claims it and the sweep leaves it to complete', async () => {
      const { apiKey } = await s.t.account();
      const { req, outcome } = startRawUpload(s.t.server.url, apiKey, 'live.bin');
      await writeBytes(req, 6 * MiB);
      expect(await eventually(openIds, (ids) => ids.length === 1)).to.have.length(1);
      const record = () => s.t.server.db.prisma.pendingObject.findFirstOrThrow({ where: { reason: 'upload' } });
      const { createdAt } = await record();
      // Older than the grace period the sweep is given below; the client sends nothing meanwhile.
      s.clock.advance(2100);
      const moved = s.clock().getTime();
      // Only the upload's own heartbeat can make its record fresh at the moved time.
      const touched = await eventually(async () => (await record()).touchedAt.getTime(), (at) => at >= moved, 5_000);
      expect(s.clock().getTime() - touched).to.be.below(1000 + HEARTBEAT_MS);
      expect(s.clock().getTime() - createdAt.getTime()).to.be.at.least(2100);
      expect(await s.t.admin('POST', '/admin/gc', { grace_seconds: 2 })).to.deep.include({ uploads: 0, strays: 0, failed: 0 });
      req.end(`\r\n--${BOUNDARY}--\r\n`);
      const res = await outcome;
      expect(res.status, res.body).to.equal(201);
      expect(JSON.parse(res.body!).size).to.equal(6 * MiB);
      expect(await openIds()).to.deep.equal([]);
    });

    if (name === 's3') {
      it('when the server died after the store created an upload but before its id was recorded, then one sweep removes record and upload', async () => {
        const key = newStorageKey();
        await s.stray(0, key);
        // What the crash leaves: the upload's record, without the upload id.
        await s.t.server.db.prisma.pendingObject.create({ data: { storageKey: key, reason: 'upload' } });
        expect(await s.t.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 0, strays: 0 });
        // Once both are older than the grace period: the record's pass removes
        // the (absent) object, the store's pass the upload the record could not name.
        expect(await s.t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 1, strays: 1, failed: 0 });
        expect(await openIds()).to.deep.equal([]);
      });
    }
  });
}
