// Real S3 only (TEST_S3_ENDPOINT with TEST_S3_PAUSE and TEST_S3_RESUME; CI
// runs it on Ceph RGW, .ci/rgw-suites.sh): the soak of issue 51 in small.
// radosgw is frozen (SIGSTOP) while uploads go through a file request; their
// PutObjects queue in its sockets and time out; it is let go (SIGCONT) while
// their clean-ups' DeleteObjects are on their way, and runs whatever it had
// queued, in an order of its own: a write applied after the delete of its
// key leaked an object no sweep found. After the late-write window one sweep
// must leave nothing, and the request's places must be free again.
import { randomBytes } from 'node:crypto';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { call } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { newRequest, sendFile } from '../requests/helpers.js';
import { requireRealS3 } from './require-real-s3.js';

requireRealS3();

const MiB = 1024 * 1024;
/** Seconds the server waits for the store's answer to a call (the put of 25 KiB gets a few ms more). */
const CALL_SECONDS = 3;
/** STORE_LATE_WRITE_WINDOW here: ample for a store that has just resumed to run what it queued. */
const LATE_SECONDS = 10;

describe('real S3: the store is frozen while uploads go through a file request, then resumes', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let t: TestServer;
  let store: S3ObjectStore;
  let bucket: string;
  let paused = false;

  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('paused');
    t = await startTestServer('pglite', {
      ...s3.env(bucket),
      GC_INTERVAL: '0',
      STORE_CALL_TIMEOUT: String(CALL_SECONDS),
      STORE_MIN_RATE: String(4 * MiB),
      STORE_LATE_WRITE_WINDOW: String(LATE_SECONDS),
    });
    store = new S3ObjectStore(s3.storeOptions(bucket));
  });
  after(async () => {
    if (paused) await s3.resume();
    await t?.close();
    await store?.close();
    await s3?.close();
  });

  const bucketKeys = async () => ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);
  const putTimeouts = async () => {
    const text = (await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken })).text;
    return Number(/^dropstream_store_timeouts_total\{operation="put_object"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  };

  it('when radosgw runs queued PutObjects after their clean-ups, then after the late-write window one sweep leaves no object and no record, and the places are free', async () => {
    const { apiKey } = await t.account();
    const request = await newRequest(t, apiKey, { max_files: 4 });
    const before = await putTimeouts();

    await s3.pause();
    paused = true;
    const uploads = Promise.all(Array.from({ length: 4 }, (_, i) => sendFile(t.server.url, request, `soak-${i}.bin`, randomBytes(25_534))));
    // Once the puts have timed out, their clean-ups' deletes are on their way: let the store go on under them.
    expect(await eventually(putTimeouts, (n) => n >= before + 4, 30_000)).to.be.at.least(before + 4);
    await s3.resume();
    paused = false;
    const answers = await uploads;
    expect(answers.map((r) => r.status)).to.deep.equal([503, 503, 503, 503]);
    const answered = Date.now();
    // The places are free as soon as the uploads answered, whatever the store did.
    expect(await t.server.db.prisma.pendingObject.count({ where: { requestId: request.request_id } })).to.equal(0);

    // Past the window: the store can no longer apply those writes.
    await eventually(async () => Date.now(), (now) => now > answered + LATE_SECONDS * 1000, (LATE_SECONDS + 5) * 1000);
    expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ failed: 0 });
    expect(await bucketKeys()).to.deep.equal([]);
    expect(await t.server.db.prisma.pendingObject.count()).to.equal(0);

    const next = await Promise.all(Array.from({ length: 4 }, (_, i) => sendFile(t.server.url, request, `after-${i}.bin`, randomBytes(1000))));
    expect(next.map((r) => r.status)).to.deep.equal([201, 201, 201, 201]);
  });
});
