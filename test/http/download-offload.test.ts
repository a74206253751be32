// Downloads offloaded to the store (S3_PRESIGNED_DOWNLOADS, issue 41): a
// GET of an unlimited link answers 302 to a presigned GetObject URL that
// makes the store answer with our Content-Disposition and type; HEAD, links
// with max_downloads and wrong passwords never reach the store. Against
// s3rver in this process (or TEST_S3_ENDPOINT), with curl -L, wget and
// headless Chromium following the redirect as users' clients do.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { chromium } from 'playwright-core';
import { attachment } from '../../src/http/attachment.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { call, upload } from '../helpers/client.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const run = promisify(execFile);
const bin = fileURLToPath(new URL('../../bin/dropstream.js', import.meta.url));
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const NAME = 'résumé – final.pdf';

/** curl with `args`: the status and headers of every response (redirects included) and the body saved. */
async function curl(url: string, args: string[] = []): Promise<{ statuses: number[]; body: Buffer; headers: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'dropstream-offload-'));
  try {
    const out = join(dir, 'body');
    const { stdout } = await run('curl', ['-sS', '-D', '-', '-o', out, ...args, url]);
    const statuses = [...stdout.matchAll(/^HTTP\/[\d.]+ (\d{3})/gm)].map((m) => Number(m[1]));
    return { statuses, body: await readFile(out).catch(() => Buffer.alloc(0)), headers: stdout };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('downloads offloaded to the store (S3_PRESIGNED_DOWNLOADS)', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let t: TestServer;
  let key: string;
  const content = randomBytes(300_000);

  before(async () => {
    s3 = await startTestS3();
    // The public endpoint names the same store by another host: only the signature may use it.
    const publicEndpoint = s3.endpoint.replace('127.0.0.1', 'localhost');
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('offload')), S3_PRESIGNED_DOWNLOADS: 'true', S3_PUBLIC_ENDPOINT: publicEndpoint, S3_PRESIGN_SECONDS: '120' });
    ({ apiKey: key } = await t.account());
  });
  after(async () => {
    await t?.close();
    await s3?.close();
  });

  async function uploadWith(options: Record<string, string> = {}): Promise<{ file_id: number; link: string }> {
    const res = await upload(t.server.url, key, [...Object.entries(options).map(([name, value]) => ({ name, content: value })), { name: 'file', filename: NAME, content }]);
    expect(res.status).to.equal(201);
    return { file_id: res.body.file_id, link: t.url(res.body.public_link) };
  }
  const downloads = async (fileId: number) => (await call(t.url(`/api/v1/files/${fileId}`), { key })).body.file.download_count as number;

  it('when a whole file is fetched, then 302 no-store to a presigned URL of the public endpoint, counted once handed out, and the store sends the bytes as our attachment', async () => {
    const file = await uploadWith();
    const res = await fetch(file.link, { redirect: 'manual' });
    expect(res.status).to.equal(302);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    const location = new URL(res.headers.get('location')!);
    expect(location.host).to.equal(new URL(s3.endpoint.replace('127.0.0.1', 'localhost')).host);
    expect(location.searchParams.get('response-content-disposition')).to.equal(attachment(NAME));
    expect(location.searchParams.get('response-content-type')).to.equal('application/octet-stream');
    expect(Number(location.searchParams.get('X-Amz-Expires'))).to.equal(120);
    expect(await downloads(file.file_id)).to.equal(1);

    const got = await curl(file.link, ['-L']);
    expect(got.statuses).to.deep.equal([302, 200]);
    expect(sha(got.body)).to.equal(sha(content));
    expect(got.headers.toLowerCase()).to.include(`content-disposition: ${attachment(NAME).toLowerCase()}`);
    expect(await downloads(file.file_id)).to.equal(2);
  });

  it('when a range is fetched, then it is redirected too, the store answers 206 with those bytes, and no download is counted', async () => {
    const file = await uploadWith();
    const got = await curl(file.link, ['-L', '-r', '1000-1999']);
    expect(got.statuses).to.deep.equal([302, 206]);
    expect(got.body.equals(content.subarray(1000, 2000))).to.equal(true);
    expect(await downloads(file.file_id)).to.equal(0);
  });

  it('when a HEAD is sent, then the server answers it itself (200, the length, no Location) and counts nothing', async () => {
    const file = await uploadWith();
    const res = await fetch(file.link, { method: 'HEAD', redirect: 'manual' });
    expect(res.status).to.equal(200);
    expect(res.headers.get('location')).to.equal(null);
    expect(res.headers.get('content-length')).to.equal(String(content.length));
    expect(res.headers.get('content-disposition')).to.equal(attachment(NAME));
    expect(await downloads(file.file_id)).to.equal(0);
  });

  it('when the link has max_downloads, then it is never offloaded: the body comes through the server and its budget holds', async () => {
    const file = await uploadWith({ max_downloads: '1' });
    const first = await curl(file.link, ['-L']);
    expect(first.statuses).to.deep.equal([200]);
    expect(sha(first.body)).to.equal(sha(content));
    expect((await curl(file.link, ['-L'])).statuses).to.deep.equal([410]);
  });

  it('when the link has a password, then none or a wrong one gets 401 and no URL; the right one the redirect', async () => {
    const file = await uploadWith({ password: 'open sesame' });
    for (const args of [[], ['-u', ':wrong']]) {
      const refused = await curl(file.link, ['-L', ...args]);
      expect(refused.statuses).to.deep.equal([401]);
      expect(refused.headers.toLowerCase()).to.not.include('location:');
    }
    const got = await curl(file.link, ['-L', '-u', ':open sesame']);
    expect(got.statuses).to.deep.equal([302, 200]);
    expect(sha(got.body)).to.equal(sha(content));
  });

  it('when the link expires sooner than S3_PRESIGN_SECONDS, then the URL ends when the link does', async () => {
    const file = await uploadWith({ expires_in: '30' });
    const res = await fetch(file.link, { redirect: 'manual' });
    expect(res.status).to.equal(302);
    const expires = Number(new URL(res.headers.get('location')!).searchParams.get('X-Amz-Expires'));
    expect(expires).to.be.within(28, 30);
  });

  it('when a fresh If-None-Match is sent, then the server answers 304 itself and counts nothing', async () => {
    const file = await uploadWith();
    const etag = `"${sha(content)}"`;
    // curl, not fetch: fetch adds Cache-Control: no-cache to a conditional request, which makes nothing fresh.
    expect((await curl(file.link, ['-L', '-H', `If-None-Match: ${etag}`])).statuses).to.deep.equal([304]);
    expect(await downloads(file.file_id)).to.equal(0);
  });

  it('when wget follows the redirect with --content-disposition, then it saves the exact name and bytes', async () => {
    const file = await uploadWith();
    const dir = await mkdtemp(join(tmpdir(), 'dropstream-offload-wget-'));
    try {
      // -S: the responses' headers (to stderr), so the redirect is seen to be taken.
      const { stderr } = await run('wget', ['-nv', '-S', '--content-disposition', '-P', dir, file.link]);
      expect(stderr).to.match(/HTTP\/1\.1 302/);
      expect(stderr).to.match(/X-Amz-Signature=/);
      expect(await readdir(dir)).to.deep.equal([NAME]);
      expect(sha(await readFile(join(dir, NAME)))).to.equal(sha(content));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('when `dropstream download` fetches the link, then it follows the redirect (without the password) and saves the exact name and bytes', async () => {
    const file = await uploadWith({ password: 'cli secret' });
    const dir = await mkdtemp(join(tmpdir(), 'dropstream-offload-cli-'));
    try {
      const { stdout } = await run(process.execPath, [bin, 'download', file.link, '--password', 'cli secret'], { cwd: dir });
      expect(stdout.trim()).to.equal(join(dir, NAME));
      expect(sha(await readFile(join(dir, NAME)))).to.equal(sha(content));
      expect(await downloads(file.file_id)).to.equal(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  itWithChromium('when a browser opens the link, then it follows the redirect and saves the file under its name', async () => {
    const file = await uploadWith();
    const profile = await mkdtemp(join(tmpdir(), 'dropstream-chromium-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      acceptDownloads: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    try {
      const page = await context.newPage();
      const saved = page.waitForEvent('download');
      await page.goto(file.link).catch(() => {}); // a download aborts the navigation
      const download = await saved;
      expect(download.suggestedFilename()).to.equal(NAME);
      expect(new URL(download.url()).searchParams.has('X-Amz-Signature')).to.equal(true);
      expect(sha(await readFile((await download.path())!))).to.equal(sha(content));
    } finally {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    }
  });
});
