// IDLE_TIMEOUT counts the client's silence only. A client that has sent its
// whole upload and waits for the answer, or whose body the server holds back
// while the store is slow, is not idle: a store completing a 5 GiB upload
// took over a minute in the benchmark (s3rver copies every byte; AWS
// documents minutes), and the client lost its 201 for a file that was
// stored. A proxy holds the store's answers here; IDLE_TIMEOUT is 2 s.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { uploadFile } from '../helpers/client.js';
import { startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { isCompleteMultipartUpload, isUploadPart, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';

const MiB = 1024 * 1024;

describe('faults: the store answers slower than IDLE_TIMEOUT (2 s)', () => {
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let key: string;

  before(async () => {
    s3 = await startTestS3();
    const bucket = s3.bucket('slow-answer');
    proxy = await startS3Proxy(s3.endpoint);
    t = await startTestServer('pglite', { ...s3.env(bucket), S3_ENDPOINT: proxy.endpoint, S3_PART_SIZE: String(5 * MiB), IDLE_TIMEOUT: '2' });
    ({ apiKey: key } = await t.account());
  });
  afterEach(() => proxy.delay(undefined));
  after(async () => {
    await t?.close();
    await proxy?.close();
    await s3?.close();
  });

  /** The bytes behind an upload's public link. */
  const download = async (publicLink: string) => Buffer.from(await (await fetch(`${t.server.url}${new URL(publicLink).pathname}`)).arrayBuffer());

  it('when completing the upload takes 4 s after its last byte, then the client gets its 201 and the file is whole', async () => {
    proxy.delay(isCompleteMultipartUpload, 4000);
    const content = randomBytes(6 * MiB);
    const started = Date.now();
    const res = await uploadFile(t.server.url, key, 'slow-complete.bin', content);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(Date.now() - started).to.be.at.least(4000);
    expect(proxy.delayedCount).to.equal(1);
    expect((await download(res.body.public_link)).equals(content)).to.equal(true);
  });

  it('when each part takes 3 s to store, so the server holds the body back for longer than IDLE_TIMEOUT, then the upload completes', async () => {
    proxy.delay(isUploadPart, 3000);
    const content = randomBytes(21 * MiB);
    const res = await uploadFile(t.server.url, key, 'slow-parts.bin', content);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(proxy.delayedCount).to.be.at.least(4);
    expect((await download(res.body.public_link)).equals(content)).to.equal(true);
  });

  it('when the client itself goes silent mid-body, then its connection is still closed after IDLE_TIMEOUT', async () => {
    const { req, outcome } = startRawUpload(t.server.url, key, 'silent.bin');
    await writeBytes(req, 1 * MiB);
    const started = Date.now();
    const result = await outcome;
    expect(result.status).to.equal(undefined);
    expect(Date.now() - started).to.be.within(1500, 6000);
  });
});
