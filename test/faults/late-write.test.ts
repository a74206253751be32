// A store that applies a write after its client gave up on it (issue 51):
// Ceph RGW under SIGSTOP ran a queued PutObject once it resumed, after the
// upload's clean-up had deleted the key (an answered delete proves nothing
// then) and dropped its record, leaving an object nobody named. Here a
// proxy in front of s3rver (or TEST_S3_ENDPOINT) takes in the PutObject and
// answers nothing, so the put times out; the clean-up's DeleteObject goes
// through; then the proxy runs the held PutObject, as the store would.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { testClock } from '../helpers/clock.js';
import { isPutObject, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { newRequest, sendFile } from '../requests/helpers.js';

const MiB = 1024 * 1024;
/** The size of the object the soak leaked. */
const SIZE = 25_534;

describe('faults: the store applies a cut PutObject after the clean-up deleted its key', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let store: S3ObjectStore;
  let bucket: string;
  let apiKey: string;
  // Moved past the late-write window instead of waiting for it.
  const clock = testClock();

  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('late-writes');
    proxy = await startS3Proxy(s3.endpoint);
    t = await startTestServer('pglite', {
      ...s3.env(bucket),
      S3_ENDPOINT: proxy.endpoint,
      GC_INTERVAL: '0',
      STORE_CALL_TIMEOUT: s3.kind === 'external' ? '3' : '1',
      STORE_MIN_RATE: String(4 * MiB),
      // The store may apply a cut write for a second after it was cut (900 s unless set).
      STORE_LATE_WRITE_WINDOW: '1',
    }, undefined, { clock });
    store = new S3ObjectStore(s3.storeOptions(bucket));
    ({ apiKey } = await t.account());
  });
  afterEach(async () => {
    proxy.hold(undefined);
    proxy.drop();
    // What a failed test left, so the next starts from an empty bucket.
    for (const key of await bucketKeys()) await store.delete(key);
  });
  after(async () => {
    await t?.close();
    await store?.close();
    await proxy?.close();
    await s3?.close();
  });

  const bucketKeys = async () => ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);
  const records = () => t.server.db.prisma.pendingObject.findMany();

  /**
   * An upload through a file request whose PutObject the store takes in and
   * does not answer: 503 store_unavailable once the put's deadline passed and
   * its clean-up (whose DeleteObject the store answers) ran. Resolves when
   * the client has its answer.
   */
  async function cutUpload(): Promise<void> {
    const request = await newRequest(t, apiKey, { max_files: 1 });
    proxy.hold(isPutObject);
    const res = await sendFile(t.server.url, request, 'late.bin', randomBytes(SIZE));
    expect(res.status, res.text).to.equal(503);
    expect(res.body.error.code).to.equal('store_unavailable');
    expect(proxy.held).to.equal(1);
    proxy.hold(undefined);
    expect(await bucketKeys(), 'the clean-up found nothing to delete').to.deep.equal([]);
  }

  /** Moves the server's clock past the late-write window (STORE_LATE_WRITE_WINDOW, 1 s here) of an upload already answered. */
  function windowPassed(): void {
    clock.advance(1100);
  }

  it('when the store applies the cut PutObject after the DeleteObject, then the upload\'s record still names the key, and one sweep after the late-write window leaves nothing', async () => {
    await cutUpload();
    // The store resumes and runs the queued write.
    expect(await proxy.release()).to.deep.equal([200]);
    const [key] = await bucketKeys();
    expect(await store.head(key!)).to.deep.equal({ size: SIZE });

    windowPassed();
    const swept = await t.admin('POST', '/admin/gc', {});
    expect(await bucketKeys()).to.deep.equal([]);
    // Found by the upload's record, not by the walk over the bucket (the object is younger than GC_GRACE).
    expect(swept).to.deep.include({ uploads: 1, orphans: 0, failed: 0 });
    expect(await records()).to.deep.equal([]);
  });

  it('when the store applies it only after the late-write window, then `gc --check` lists the object no file or record names, leaving it, and a sweep removes it once it is older than the grace period', async () => {
    await cutUpload();
    windowPassed();
    expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ failed: 0 });
    expect(await records()).to.deep.equal([]);
    // Later than anyone waited: no record names the object any more.
    expect(await proxy.release()).to.deep.equal([200]);
    const [key] = await bucketKeys();
    expect(key).to.be.a('string');

    // The command in a process of its own (the server runs in this one, so it must not be blocked).
    const cli = await promisify(execFile)(process.execPath, ['bin/dropstream.js', 'gc', '--check', '--grace', '0'], {
      env: { ...process.env, ADMIN_URL: t.server.adminUrl, ADMIN_TOKEN: t.server.adminToken },
    });
    const checked = JSON.parse(cli.stdout);
    expect(checked).to.deep.include({ checked: 1, orphans_total: 1 });
    expect(checked.orphans.map((o: { key: string; size: number }) => ({ key: o.key, size: o.size }))).to.deep.equal([{ key, size: SIZE }]);
    expect(await bucketKeys(), '--check removes nothing').to.deep.equal([key]);

    // Written just now: younger than GC_GRACE (an hour), so not yet.
    expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ orphans: 0, failed: 0 });
    expect(await bucketKeys()).to.deep.equal([key]);
    expect(await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ orphans: 1, failed: 0 });
    expect(await bucketKeys()).to.deep.equal([]);
  });
});
