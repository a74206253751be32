// Real S3 only (TEST_S3_ENDPOINT; CI runs these on Ceph RGW, .ci/rgw-suites.sh):
// offloaded downloads (S3_PRESIGNED_DOWNLOADS) against a store that checks
// signatures and expiry, which s3rver does not: the URL works as handed out,
// for the public endpoint's host, and stops working when tampered with or
// when its lifetime is over.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { attachment } from '../../src/downloads/attachment.js';
import { upload } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { requireRealS3 } from './require-real-s3.js';

requireRealS3();

const run = promisify(execFile);
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const NAME = 'Ångström report – v2.bin';

describe('real S3: downloads offloaded to the store', function () {
  this.timeout(90_000);
  let s3: TestS3;
  const servers: TestServer[] = [];
  const content = randomBytes(200_000);

  before(async () => {
    s3 = await startTestS3();
  });
  after(async () => {
    await Promise.all(servers.map((t) => t.close()));
    await s3?.close();
  });

  /** A server offloading to a bucket of its own, signing for `localhost` (the same store by another name); a file on it and its link. */
  async function offloading(seconds: number): Promise<{ t: TestServer; link: string }> {
    const t = await startTestServer('pglite', {
      ...s3.env(s3.bucket('offload')),
      S3_PRESIGNED_DOWNLOADS: 'true',
      S3_PUBLIC_ENDPOINT: s3.endpoint.replace('127.0.0.1', 'localhost'),
      S3_PRESIGN_SECONDS: String(seconds),
    });
    servers.push(t);
    const { apiKey } = await t.account();
    const res = await upload(t.server.url, apiKey, [{ name: 'file', filename: NAME, content }]);
    expect(res.status).to.equal(201);
    return { t, link: t.url(res.body.public_link) };
  }

  const locationOf = async (link: string) => {
    const res = await fetch(link, { redirect: 'manual' });
    expect(res.status).to.equal(302);
    return res.headers.get('location')!;
  };

  /** GET `url` straight from the store: the status, the body and the Content-Disposition. */
  const fromStore = async (url: string, headers: Record<string, string> = {}) => {
    const res = await fetch(url, { headers });
    return { status: res.status, body: Buffer.from(await res.arrayBuffer()), disposition: res.headers.get('content-disposition') };
  };

  it('when the presigned URL is fetched, then the store checks its signature for the public host and sends the bytes as our attachment, ranges too', async () => {
    const { link } = await offloading(60);
    const url = await locationOf(link);
    expect(new URL(url).hostname).to.equal('localhost');
    const whole = await fromStore(url);
    expect(whole.status).to.equal(200);
    expect(sha(whole.body)).to.equal(sha(content));
    expect(whole.disposition).to.equal(attachment(NAME));
    const part = await fromStore(url, { Range: 'bytes=100-199' });
    expect(part.status).to.equal(206);
    expect(part.body.equals(content.subarray(100, 200))).to.equal(true);
    // curl -L, as a user would: through the redirect, saved under the exact name.
    const { stdout } = await run('curl', ['-sS', '-L', '-o', '/dev/null', '-w', '%{http_code} %{size_download} %{num_redirects}', link]);
    expect(stdout).to.equal(`200 ${content.length} 1`);
  });

  it('when the URL is tampered with (another file name), then the store refuses it: the name is signed', async () => {
    const { link } = await offloading(60);
    const url = new URL(await locationOf(link));
    url.searchParams.set('response-content-disposition', 'inline; filename="x.html"');
    expect((await fromStore(url.toString())).status).to.equal(403);
  });

  it('when S3_PRESIGN_SECONDS has passed, then the handed-out URL is refused', async () => {
    const { link } = await offloading(1);
    const url = await locationOf(link);
    const status = await eventually(async () => (await fromStore(url)).status, (s) => s === 403, 10_000);
    expect(status).to.equal(403);
  });
});
