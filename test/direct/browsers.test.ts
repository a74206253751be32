// The browser pages with uploads straight to the store (S3_DIRECT_UPLOADS,
// docs/direct-uploads.md): headless Chromium sends a file from the web app
// (/app) and from a file request's page (/r/{token}) to the store in parts,
// through the URLs the service signs. The store is reached through a proxy
// (test/helpers/s3-proxy.ts) at S3_PUBLIC_ENDPOINT, which the service's
// own S3 client never uses: what the proxy sees is what browsers sent. The
// bucket's CORS rule is the one docs/operating.md gives: the page's origin,
// PUT, ETag exposed. On s3rver here, and on Ceph RGW in CI
// (.ci/rgw-suites.sh), which checks the parts' signed lengths and the rule.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutBucketCorsCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { APP_CSP, appCsp } from '../../src/http/static-file.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { call } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { isUploadPart, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { linkPath, newRequest } from '../requests/helpers.js';

const MiB = 1024 * 1024;
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('browser uploads straight to the store (S3_DIRECT_UPLOADS)', function () {
  this.timeout(90_000);
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let client: S3Client;
  let bucket: string;
  let dir: string;
  let browser: Browser | undefined;

  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('direct-web');
    proxy = await startS3Proxy(s3.endpoint);
    t = await startTestServer('pglite', { ...s3.env(bucket), S3_DIRECT_UPLOADS: 'true', S3_PUBLIC_ENDPOINT: proxy.endpoint });
    client = new S3Client({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials, forcePathStyle: true });
    await allowPage(['ETag']);
    dir = await mkdtemp(join(tmpdir(), 'dropstream-direct-web-'));
  });
  after(async () => {
    await browser?.close();
    client?.destroy();
    await t?.close();
    await proxy?.close();
    await s3?.close();
    if (dir) {
      await rm(join(dir, 'inputs'), { recursive: true, force: true });
      console.log(`      direct upload screenshots: ${dir}`);
    }
  });

  /** The bucket's CORS rule for browsers (docs/operating.md): the page's origin may PUT, and read the headers `expose`. */
  const allowPage = (expose: string[]) =>
    client.send(new PutBucketCorsCommand({ Bucket: bucket, CORSConfiguration: { CORSRules: [{ AllowedOrigins: [t.server.url], AllowedMethods: ['PUT'], ExposeHeaders: expose }] } }));

  /** A page that records every request it makes (method and URL) and every CSP complaint. */
  async function open(path: string) {
    browser ??= await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    const requests: { method: string; url: string; authorization?: string }[] = [];
    const complaints: string[] = [];
    page.on('request', (req) => requests.push({ method: req.method(), url: req.url(), authorization: req.headers().authorization }));
    page.on('console', (msg) => {
      if (/Content Security Policy|Refused to/i.test(msg.text())) complaints.push(msg.text());
    });
    await page.goto(t.url(path));
    return { page, requests, complaints, close: () => context.close() };
  }

  async function input(name: string, bytes: number) {
    const content = randomBytes(bytes);
    await mkdir(join(dir, 'inputs'), { recursive: true });
    const path = join(dir, 'inputs', name);
    await writeFile(path, content);
    return { path, content };
  }

  /** Adds a file to Uppy's dashboard, once the page has asked which way uploads go. */
  async function choose(page: Page, path: string) {
    await page.locator('#uploader[data-transport]').waitFor();
    expect(await page.locator('#uploader').getAttribute('data-transport')).to.equal('direct');
    await page.locator('input.uppy-Dashboard-input').first().setInputFiles(path);
  }

  /** The part PUTs that reached the store from a page since `from` (an index into proxy.received). */
  const partsFromPages = (from: number) => proxy.received.slice(from).filter((r) => isUploadPart(r) && r.origin === t.server.url);

  it('when direct uploads are on, then the upload pages\' CSP may connect to the store\'s public origin, and /docs\' stays on its own', async () => {
    const store = new URL(proxy.endpoint).origin;
    for (const path of ['/app', linkPath(await newRequest(t, (await t.account()).apiKey))]) {
      const res = await fetch(t.url(path));
      expect(res.status, path).to.equal(200);
      expect(res.headers.get('content-security-policy'), path).to.equal(appCsp([store]));
    }
    expect(appCsp([store])).to.include(`connect-src 'self' ${store};`).and.not.include('unsafe');
    expect((await fetch(t.url('/docs'))).headers.get('content-security-policy')).to.equal(APP_CSP);
  });

  itWithChromium('when an owner uploads 40 MiB in the web app, then the browser PUTs its three parts (16, 16 and 8 MiB) to the store, the service gets none of its bytes, and the file downloads with the same SHA-256', async () => {
    const { apiKey } = await t.account();
    const { page, requests, complaints, close } = await open('/app');
    try {
      await page.getByLabel('API key').fill(apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path, content } = await input('forty.bin', 40 * MiB);
      const from = proxy.received.length;
      await choose(page, path);
      const row = page.locator('tr.file', { hasText: 'forty.bin' });
      await row.waitFor({ timeout: 60_000 });
      await page.screenshot({ path: join(dir, 'web-app-direct.png'), fullPage: true });
      const link = (await row.locator('a.public-link').getAttribute('href'))!;
      const got = Buffer.from(await (await fetch(t.url(link))).arrayBuffer());
      expect(got.length).to.equal(40 * MiB);
      expect(sha(got)).to.equal(sha(content));

      // The store got the parts from the page itself, each of its signed size, the whole file once.
      const parts = partsFromPages(from);
      expect(parts.map((p) => new URL(p.url, proxy.endpoint).searchParams.get('partNumber')).sort()).to.deep.equal(['1', '2', '3']);
      expect(parts.map((p) => p.bytes).sort((a, b) => a - b)).to.deep.equal([8 * MiB, 16 * MiB, 16 * MiB]);
      // The service had JSON only: no tus, no plain upload, nothing PUT or PATCHed to it.
      const toService = requests.filter((r) => r.url.startsWith(t.server.url));
      expect(toService.filter((r) => /\/api\/v1\/uploads(\/|$)(?!direct)|\/files\/upload/.test(new URL(r.url).pathname))).to.deep.equal([]);
      expect(toService.filter((r) => r.method === 'PUT' || r.method === 'PATCH')).to.deep.equal([]);
      expect(toService.filter((r) => r.method === 'POST').map((r) => new URL(r.url).pathname.replace(/direct\/[^/]+/, 'direct/{id}'))).to.deep.equal([
        '/api/v1/uploads/direct',
        '/api/v1/uploads/direct/{id}/complete',
      ]);
      expect(requests.filter((r) => !r.url.startsWith(t.server.url) && !r.url.startsWith(proxy.endpoint))).to.deep.equal([]);
      // The key goes to the service alone: the parts' URLs are signed.
      expect(toService.some((r) => r.authorization === `Bearer ${apiKey}`)).to.equal(true);
      const toStore = requests.filter((r) => r.url.startsWith(proxy.endpoint));
      expect(toStore).to.have.length.of.at.least(3);
      expect(toStore.filter((r) => r.authorization !== undefined || r.url.includes(apiKey))).to.deep.equal([]);
      expect(complaints).to.deep.equal([]);
    } finally {
      await close();
    }
  });

  itWithChromium('when the page is reloaded mid-upload and the same file chosen again, then it goes on with the same upload and sends only the part the store lacks', async () => {
    const { apiKey } = await t.account();
    const { page, requests, close } = await open('/app');
    const isPart3 = (req: { method?: string; url?: string }) => req.method === 'PUT' && /[?&]partNumber=3(&|$)/.test(req.url ?? '');
    try {
      await page.getByLabel('API key').fill(apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path, content } = await input('reloaded.bin', 40 * MiB);
      const from = proxy.received.length;
      // The store takes parts 1 and 2 and hangs on part 3.
      proxy.hold(isPart3);
      await choose(page, path);
      const reached = await eventually(async () => partsFromPages(from).filter((p) => p.status === 200).length + proxy.held, (n) => n === 3, 30_000);
      expect(reached, 'parts 1 and 2 stored, part 3 held').to.equal(3);
      const again = proxy.received.length;
      const before = requests.length;
      await page.reload();
      proxy.hold(undefined);
      proxy.drop();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      await choose(page, path);
      const row = page.locator('tr.file', { hasText: 'reloaded.bin' });
      await row.waitFor({ timeout: 60_000 });
      const link = (await row.locator('a.public-link').getAttribute('href'))!;
      expect(sha(Buffer.from(await (await fetch(t.url(link))).arrayBuffer()))).to.equal(sha(content));
      // After the reload: one upload asked about, none created, and part 3 alone sent.
      const after = requests.slice(before).filter((r) => r.url.startsWith(t.server.url) && /\/uploads\/direct/.test(r.url));
      expect(after.map((r) => `${r.method} ${new URL(r.url).pathname.replace(/direct\/[^/]+/, 'direct/{id}')}`)).to.deep.equal([
        'GET /api/v1/uploads/direct',
        'GET /api/v1/uploads/direct/{id}',
        'POST /api/v1/uploads/direct/{id}/parts',
        'POST /api/v1/uploads/direct/{id}/complete',
      ]);
      expect(partsFromPages(again).map((p) => new URL(p.url, proxy.endpoint).searchParams.get('partNumber'))).to.deep.equal(['3']);
      expect(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('dropstream.direct:')))).to.deep.equal([]);
    } finally {
      proxy.hold(undefined);
      proxy.drop();
      await close();
    }
  });

  /** Signs in on a new page and chooses a 40 MiB file while the store hangs on part 2; resolves once parts 1 and 3 are stored. */
  async function uploadHangingOnPart2(name: string) {
    const { apiKey } = await t.account();
    const opened = await open('/app');
    const { page } = opened;
    await page.getByLabel('API key').fill(apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Files' }).waitFor();
    const file = await input(name, 40 * MiB);
    const from = proxy.received.length;
    proxy.hold((req) => req.method === 'PUT' && /[?&]partNumber=2(&|$)/.test(req.url ?? ''));
    await choose(page, file.path);
    const reached = await eventually(async () => partsFromPages(from).filter((p) => p.status === 200).length + proxy.held, (n) => n === 3, 30_000);
    expect(reached, 'parts 1 and 3 stored, part 2 held').to.equal(3);
    return { ...opened, ...file, apiKey };
  }

  const directCalls = (requests: { method: string; url: string }[]) =>
    requests.filter((r) => r.url.startsWith(t.server.url) && /\/uploads\/direct/.test(r.url)).map((r) => `${r.method} ${new URL(r.url).pathname.replace(/direct\/[^/]+/, 'direct/{id}')}`);

  itWithChromium('when an upload is paused and resumed in the dashboard, then it asks which parts the store holds and sends only the missing one', async () => {
    const { page, requests, content, close } = await uploadHangingOnPart2('paused.bin');
    try {
      await page.getByRole('button', { name: 'Pause upload' }).click();
      proxy.hold(undefined);
      proxy.drop();
      const from = proxy.received.length;
      const before = requests.length;
      await page.getByRole('button', { name: 'Resume upload' }).click();
      const row = page.locator('tr.file', { hasText: 'paused.bin' });
      await row.waitFor({ timeout: 60_000 });
      expect(sha(Buffer.from(await (await fetch(t.url((await row.locator('a.public-link').getAttribute('href'))!))).arrayBuffer()))).to.equal(sha(content));
      expect(directCalls(requests.slice(before))).to.deep.equal(['GET /api/v1/uploads/direct/{id}', 'POST /api/v1/uploads/direct/{id}/complete']);
      expect(partsFromPages(from).map((p) => new URL(p.url, proxy.endpoint).searchParams.get('partNumber'))).to.deep.equal(['2']);
    } finally {
      proxy.hold(undefined);
      proxy.drop();
      await close();
    }
  });

  itWithChromium('when uploads are cancelled in the dashboard mid-upload, then the page deletes the upload, which the service no longer knows, and forgets it', async () => {
    const { page, requests, apiKey, close } = await uploadHangingOnPart2('cancelled.bin');
    try {
      await page.getByRole('button', { name: 'Cancel' }).first().click();
      const deleted = await eventually(async () => requests.filter((r) => r.method === 'DELETE' && /\/api\/v1\/uploads\/direct\/[^/]+$/.test(r.url)), (d) => d.length === 1, 10_000);
      expect(deleted).to.have.length(1);
      const uploadUrl = deleted[0]!.url;
      const gone = await eventually(async () => (await call(uploadUrl, { key: apiKey })).status, (status) => status === 404, 10_000);
      expect(gone).to.equal(404);
      expect(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('dropstream.direct:')))).to.deep.equal([]);
      expect((await call(t.url('/api/v1/files'), { key: apiKey })).body.files).to.deep.equal([]);
    } finally {
      proxy.hold(undefined);
      proxy.drop();
      await close();
    }
  });

  itWithChromium('when the store answers a part 503 SlowDown, then the page sends that part again by itself and the file is whole', async () => {
    const { apiKey } = await t.account();
    const { page, close } = await open('/app');
    let refused = false;
    try {
      await page.getByLabel('API key').fill(apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path, content } = await input('slow-down.bin', 20 * MiB);
      const from = proxy.received.length;
      // Once: the first PUT of part 2 is refused, as a busy S3 does. (A cut connection would not do:
      // Chromium itself sends a PUT again when its reused connection closes before an answer.)
      proxy.fail((req) => !refused && req.method === 'PUT' && /[?&]partNumber=2(&|$)/.test(req.url ?? '') && (refused = true), 503);
      await choose(page, path);
      const row = page.locator('tr.file', { hasText: 'slow-down.bin' });
      await row.waitFor({ timeout: 60_000 });
      expect(proxy.failCount).to.equal(1);
      const link = (await row.locator('a.public-link').getAttribute('href'))!;
      expect(sha(Buffer.from(await (await fetch(t.url(link))).arrayBuffer()))).to.equal(sha(content));
      // Part 1 once; part 2 refused, then sent again.
      expect(partsFromPages(from).map((p) => new URL(p.url, proxy.endpoint).searchParams.get('partNumber')).sort()).to.deep.equal(['1', '2', '2']);
    } finally {
      proxy.fail(undefined);
      await close();
    }
  });

  itWithChromium('when the service refuses the upload (over the plan\'s max_file_size), then the page shows the API\'s own status and message, and nothing reaches the store', async () => {
    await t.plan('direct-small', { api_access: true, requests_per_minute: 1_000_000, requests_per_day: 1_000_000, max_file_size: 6 * MiB, daily_uploads: 1000 });
    const { apiKey } = await t.account('direct-small');
    // What the API itself answers for such a file.
    const refused = await call(t.url('/api/v1/uploads/direct'), { method: 'POST', key: apiKey, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ filename: 'big.bin', size: 7 * MiB }) });
    expect(refused.status).to.be.within(400, 499);
    const { page, close } = await open('/app');
    try {
      await page.getByLabel('API key').fill(apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path } = await input('big.bin', 7 * MiB);
      const from = proxy.received.length;
      await choose(page, path);
      const alert = page.locator('#error');
      await alert.waitFor({ timeout: 30_000 });
      expect(await alert.textContent()).to.equal(`${refused.status}: ${refused.body.error.message}`);
      await page.screenshot({ path: join(dir, 'web-app-direct-refused.png'), fullPage: true });
      expect(partsFromPages(from)).to.deep.equal([]);
    } finally {
      await close();
    }
  });

  itWithChromium('when a file has no bytes (the direct routes take sizes from 1), then the page sends it as a plain upload and it is listed', async () => {
    const { apiKey } = await t.account();
    const { page, requests, close } = await open('/app');
    try {
      await page.getByLabel('API key').fill(apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path } = await input('empty.txt', 0);
      await choose(page, path);
      await page.locator('tr.file', { hasText: 'empty.txt' }).waitFor({ timeout: 30_000 });
      const [file] = (await call(t.url('/api/v1/files'), { key: apiKey })).body.files;
      expect(file).to.include({ filename: 'empty.txt', size: 0 });
      expect(requests.filter((r) => r.method === 'POST').map((r) => new URL(r.url).pathname)).to.deep.equal(['/api/v1/files/upload']);
    } finally {
      await close();
    }
  });

  itWithChromium('when an outsider sends a file through a request\'s page, then it goes to the store in parts and the owner gets the same bytes', async () => {
    const owner = await t.account();
    const request = await newRequest(t, owner.apiKey, { title: 'Scans', max_files: 2 });
    const { page, requests, complaints, close } = await open(linkPath(request));
    try {
      const { path, content } = await input('scan.bin', 20 * MiB);
      const from = proxy.received.length;
      await choose(page, path);
      await page.getByRole('list', { name: 'Files received' }).getByText('scan.bin (20.0 MiB): done').waitFor({ timeout: 60_000 });
      await page.screenshot({ path: join(dir, 'request-page-direct.png'), fullPage: true });
      expect(partsFromPages(from).map((p) => p.bytes).sort((a, b) => a - b)).to.deep.equal([4 * MiB, 16 * MiB]);
      expect(requests.filter((r) => r.method === 'PATCH' || (r.method === 'PUT' && r.url.startsWith(t.server.url)))).to.deep.equal([]);
      expect(complaints).to.deep.equal([]);
      const received = await eventually(
        async () => (await call(t.url(`/api/v1/requests/${request.request_id}`), { key: owner.apiKey })).body.files as { public_link: string }[],
        (files) => files.length === 1,
      );
      const got = Buffer.from(await (await fetch(t.url(received[0]!.public_link))).arrayBuffer());
      expect(sha(got)).to.equal(sha(content));
    } finally {
      await close();
    }
  });

  itWithChromium('when the store\'s CORS rule does not expose ETag, then the page says so rather than failing silently, and nothing becomes a file', async () => {
    const { apiKey } = await t.account();
    await allowPage([]);
    const { page, close } = await open('/app');
    try {
      await page.getByLabel('API key').fill(apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path } = await input('hidden-etag.bin', 6 * MiB);
      await choose(page, path);
      const alert = page.locator('#error');
      await alert.waitFor({ timeout: 30_000 });
      expect(await alert.textContent()).to.match(/did not show its ETag: its CORS rule must expose the ETag header/);
      await page.screenshot({ path: join(dir, 'web-app-direct-no-etag.png') });
      expect((await call(t.url('/api/v1/files'), { key: apiKey })).body.files).to.deep.equal([]);
    } finally {
      await close();
      await allowPage(['ETag']);
    }
  });
});
