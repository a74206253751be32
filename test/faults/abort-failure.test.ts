// A failed upload whose abort cannot reach the store while its delete can
// (the store briefly unreachable): the pending record, which holds the
// multipart upload id, must stay until an abort succeeds, or the incomplete
// upload leaks where no sweep can name it. A proxy cuts only the aborts.
import { randomBytes } from 'node:crypto';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { uploadFile } from '../helpers/client.js';
import { eventually, startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { isAbortMultipartUpload, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';

const MiB = 1024 * 1024;

describe('faults: the abort of a failed upload cannot reach the store, its delete can', () => {
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let store: S3ObjectStore;
  let bucket: string;
  let key: string;

  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('abort-fails');
    proxy = await startS3Proxy(s3.endpoint);
    t = await startTestServer('pglite', { ...s3.env(bucket), S3_ENDPOINT: proxy.endpoint, S3_PART_SIZE: String(5 * MiB), GC_INTERVAL: '0' });
    store = new S3ObjectStore(s3.storeOptions(bucket));
    await t.plan('one-a-day', { api_access: true, requests_per_minute: 100_000, requests_per_day: 100_000, max_file_size: 100 * MiB, daily_uploads: 1 });
    ({ apiKey: key } = await t.account('one-a-day'));
  });
  after(async () => {
    await t?.close();
    await store?.close();
    await proxy?.close();
    await s3?.close();
  });

  const bucketKeys = async () => ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);

  it('when the client hangs up after two parts, then the slot comes back at once, the upload stays open, and the sweep aborts it by its record', async () => {
    proxy.cut(isAbortMultipartUpload);
    const { req, outcome } = startRawUpload(t.server.url, key, 'cut.bin');
    await writeBytes(req, 11 * MiB);
    expect(await eventually(() => allOpenUploads(store), (open) => open.length === 1)).to.have.length(1);
    req.destroy();
    await outcome;

    // The failed upload gives its day's only slot back once it has settled.
    const tiny = await eventually(
      () => uploadFile(t.server.url, key, 'tiny.txt', 'x'),
      (res) => res.status === 201,
      20_000,
    );
    expect(tiny.status).to.equal(201);
    expect(proxy.cutCount).to.be.at.least(2); // the put's own abort, then the clean-up's
    const [open] = await allOpenUploads(store);
    expect(open, 'the incomplete upload is still in the store').to.not.equal(undefined);

    proxy.cut(undefined);
    // With the record kept, the sweep knows the upload (uploads: 1); had the
    // record been dropped, only the store-side backstop would find it (strays: 1).
    expect(await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 1, strays: 0, failed: 0 });
    expect(await allOpenUploads(store)).to.deep.equal([]);
    expect(await bucketKeys()).to.have.length(1); // tiny.txt only

    // The slot came back once: the sweep did not return it a second time.
    const refused = await uploadFile(t.server.url, key, 'again.txt', randomBytes(10));
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal('daily_upload_limit');
  });
});
