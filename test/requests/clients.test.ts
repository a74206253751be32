// File request links as clients others wrote use them (issue 45): the
// official tus-js-client through /r/{token}/uploads across a cut
// connection, and the upload page in headless Chromium.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { chromium } from 'playwright-core';
import { Upload } from 'tus-js-client';
import { WEB_DIST } from '../../src/http/static-file.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { call } from '../helpers/client.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { eventually } from '../helpers/raw-upload.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';
import { linkPath, newRequest } from './helpers.js';

const MiB = 1024 * 1024;
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('file request links with tus-js-client and Chromium', function () {
  this.timeout(60_000);
  let t: TestServer;
  let dir: string;
  before(async () => {
    t = await sharedServer('pglite');
    dir = await mkdtemp(join(tmpdir(), 'dropstream-request-clients-'));
  });
  after(async () => {
    // The screenshot stays for a person to look at; the inputs go.
    await rm(join(dir, 'input.bin'), { force: true });
    console.log(`      file request screenshots: ${join(dir, 'request-page.png')}, ${join(dir, 'request-full.png')}, ${join(dir, 'app-requests.png')}`);
  });

  /** The owner's file that came through `request`, downloaded; its SHA-256. */
  async function receivedSha(key: string, request: { request_id: string }): Promise<string> {
    const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key });
    expect(got.body.files).to.have.length(1);
    const res = await fetch(t.url(got.body.files[0].public_link));
    return sha(Buffer.from(await res.arrayBuffer()));
  }

  it('when the connection is cut mid-upload, then tus-js-client resumes through /r/{token}/uploads and the owner gets the same bytes', async () => {
    const owner = await t.account();
    const request = await newRequest(t, owner.apiKey, { max_files: 1 });
    const data = randomBytes(12 * MiB);
    const proxy = await startCuttingProxy(t.server.url, [5 * MiB]);
    try {
      const offsets: number[] = [];
      await new Promise<void>((resolve, reject) => {
        const upload = new Upload(data, {
          endpoint: `${proxy.url}${linkPath(request)}/uploads`,
          metadata: { filename: 'report.bin' },
          chunkSize: 4 * MiB,
          retryDelays: [0, 250, 500, 1000],
          onAfterResponse: (req, res) => {
            if (req.getMethod() === 'HEAD') offsets.push(Number(res.getHeader('Upload-Offset')));
            // The outsider is not told the owner's file id or link.
            expect(res.getHeader('Dropstream-Public-Link') ?? null).to.equal(null);
          },
          onError: reject,
          onSuccess: () => resolve(),
        });
        upload.start();
      });
      expect(proxy.cuts()).to.equal(1);
      expect(offsets.some((o) => o > 0), `resumed from ${offsets.join(', ')}`).to.equal(true);
    } finally {
      await proxy.close();
    }
    expect(await receivedSha(owner.apiKey, request)).to.equal(sha(data));
  });

  itWithChromium('when an outsider opens the upload page and chooses a file, then it shows the request\'s title and limits, the file done, and fetches nothing outside its origin', async () => {
    const owner = await t.account();
    const request = await newRequest(t, owner.apiKey, { title: 'Print files for Friday', max_files: 5, max_file_size: 10 * MiB });
    const content = randomBytes(MiB + 123);
    const input = join(dir, 'input.bin');
    await writeFile(input, content);
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
      const origin = t.server.url;
      const requests: string[] = [];
      page.on('request', (req) => requests.push(req.url()));
      await page.goto(t.url(linkPath(request)));
      await page.getByRole('heading', { name: 'Print files for Friday' }).waitFor();
      // Made without expires_in: open for the default 7 days, and the page says until when.
      expect(await page.locator('#limits').textContent()).to.match(/^This request takes up to 5 files, at most 10\.0 MiB each, open until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.$/);
      await page.locator('input.uppy-Dashboard-input').first().setInputFiles(input);
      await page.getByRole('list', { name: 'Files received' }).getByText('input.bin (1.0 MiB): done').waitFor({ timeout: 30_000 });
      await page.screenshot({ path: join(dir, 'request-page.png'), fullPage: true });
      expect(requests.filter((url) => !url.startsWith(origin)), 'requests outside the origin').to.deep.equal([]);
    } finally {
      await browser.close();
    }
    expect(await eventually(() => receivedSha(owner.apiKey, request).catch(() => ''), (s) => s === sha(content))).to.equal(sha(content));
  });

  itWithChromium('when the owner creates a request in the web app (/app), then it is listed with its upload link and limits, and closing it takes it off the list', async () => {
    const owner = await t.account();
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1000, height: 1400 } });
      page.on('dialog', (dialog) => void dialog.accept());
      await page.goto(t.url('/app'));
      await page.getByLabel('API key').fill(owner.apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'File requests' }).waitFor();
      await page.getByLabel('Title').fill('Contracts');
      await page.getByLabel('Most files').fill('4');
      await page.getByLabel('Largest file (MiB)').fill('2');
      await page.getByRole('button', { name: 'Create request' }).click();
      const list = page.getByRole('list', { name: 'Open file requests' });
      await list.getByText('0 of 4 received, at most 2.0 MiB each').waitFor();
      const [made] = (await call(t.url('/api/v1/requests'), { key: owner.apiKey })).body.requests;
      expect(made).to.include({ title: 'Contracts', max_files: 4, max_file_size: 2 * MiB });
      expect(await list.getByRole('link').getAttribute('href')).to.equal(made.upload_link);
      await page.locator('#requests').screenshot({ path: join(dir, 'app-requests.png') });
      await page.getByRole('button', { name: 'Close Contracts' }).click();
      await list.getByText('No open requests.').waitFor();
      expect((await call(t.url(`/api/v1/requests/${made.request_id}`), { key: owner.apiKey })).status).to.equal(404);
    } finally {
      await browser.close();
    }
  });

  itWithChromium('when an outsider opens the link of a full request, then the browser shows why no file can be sent, with 410', async () => {
    const owner = await t.account();
    const request = await newRequest(t, owner.apiKey, { title: 'One photo please', max_files: 1 });
    const sent = await fetch(`${t.url(linkPath(request))}/files`, { method: 'POST', body: (() => { const form = new FormData(); form.append('file', new Blob(['x']), 'x.jpg'); return form; })() });
    expect(sent.status).to.equal(201);
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    try {
      const page = await browser.newPage({ viewport: { width: 800, height: 400 } });
      const res = await page.goto(t.url(linkPath(request)));
      expect(res?.status()).to.equal(410);
      await page.getByRole('heading', { name: 'This link takes no more files' }).waitFor();
      expect(await page.locator('#reason').textContent()).to.equal('This file request has received its 1 file.');
      await page.screenshot({ path: join(dir, 'request-full.png'), fullPage: true });
    } finally {
      await browser.close();
    }
  });

  it('when the upload page is built, then its JS and CSS together are under 250 KB gzipped', async () => {
    const manifest = JSON.parse(await readFile(join(WEB_DIST, 'manifest.json'), 'utf8'));
    let total = 0;
    for (const name of [manifest.request.js, manifest.request.css]) total += gzipSync(await readFile(join(WEB_DIST, name)), { level: 9 }).length;
    expect(total).to.be.above(10_000).and.below(250 * 1024);
  });
});
