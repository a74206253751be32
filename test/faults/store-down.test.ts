import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { startS3rver, type TestS3 } from '../helpers/s3rver.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('faults: the object store stops mid-download and comes back', () => {
  let s3: TestS3;
  let t: TestServer;
  let key: string;
  const content = randomBytes(24 * MiB);
  let file: { file_id: number; public_link: string };

  before(async () => {
    s3 = await startS3rver();
    t = await startTestServer('pglite', { ...s3.env('downloads'), S3_PART_SIZE: String(5 * MiB) });
    ({ apiKey: key } = await t.account());
    file = (await uploadFile(t.server.url, key, 'big.bin', content)).body;
  });
  after(async () => {
    await t.close();
    await s3.close();
  });

  it('when the store stops while a download streams, then the download is cut (not completed, not counted) and the server keeps serving', async () => {
    const outcome = await new Promise<{ received: number; complete: boolean }>((resolve) => {
      let received = 0;
      const req = request(t.url(file.public_link), (res) => {
        res.once('data', () => void s3.stop());
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          // Read slowly, so most of the object is still in the store when it stops.
          res.pause();
          setTimeout(() => res.resume(), 5);
        });
        res.on('end', () => resolve({ received, complete: res.complete }));
        res.on('error', () => resolve({ received, complete: false }));
        res.on('close', () => resolve({ received, complete: res.complete }));
      });
      req.on('error', () => resolve({ received: 0, complete: false }));
      req.end();
    });
    expect(outcome.complete).to.equal(false);
    expect(outcome.received).to.be.below(content.length);
    expect((await call(t.url('/healthz'))).status).to.equal(200);
    const info = await call(t.url(`/api/v1/files/${file.file_id}`), { key });
    expect(info.body.file.download_count).to.equal(0);
    const unavailable = await call(t.url(file.public_link));
    expect(unavailable.status).to.equal(503);
    expect(unavailable.body.error.code).to.equal('store_unavailable');
  });

  it('when the store is back, then downloads work again without a restart', async () => {
    await s3.start();
    const res = await fetch(t.url(file.public_link));
    expect(res.status).to.equal(200);
    expect(sha(Buffer.from(await res.arrayBuffer()))).to.equal(sha(content));
  });
});
