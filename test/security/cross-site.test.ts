// Issue 50, item 3: a browser that holds a link's password (HTTP Basic,
// which it caches and sends again on its own) must not let another site's
// page spend it. Writes under /r/ (POST, PATCH, DELETE) that a browser marks
// as another site's (Sec-Fetch-Site) or whose Origin is not the service's
// are refused 403 `cross_site_request` before the password or any byte is
// read; a password download link is served to another site's page only as
// a top-level navigation (a link clicked in a mail). curl, tus clients and
// the upload page itself (same origin) keep working. Headless Chromium plays
// the attack with two origins, 127.0.0.1 (the service) and localhost (the
// other site): different sites, both secure contexts, so Chromium sends
// Sec-Fetch-*.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { chromium, type Browser } from 'playwright-core';
import { derivations } from '../../src/links/link-password.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { call, upload, type ApiResponse } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { PUBLIC_URL, type TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';
import { linkPath, newRequest, sendFile } from '../requests/helpers.js';

const basic = (password: string) => `Basic ${Buffer.from(`visitor:${password}`).toString('base64')}`;
const CROSS_SITE = { 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Dest': 'document' };

/**
 * A GET with exactly these headers: fetch (undici) adds its own
 * Sec-Fetch-Mode (cors) to whatever is given.
 */
function get(url: string, headers: Record<string, string>): Promise<{ status: number; text: string; code?: string }> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk) => (text += chunk)).on('end', () => {
        let code: string | undefined;
        try {
          code = JSON.parse(text).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode!, text, code });
      });
    }).on('error', reject).end();
  });
}

/** A page of "another site": an HTTP server on every loopback address, reached as http://localhost:PORT. */
async function otherSite(html: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(html);
  });
  server.listen(0);
  await once(server, 'listening');
  return {
    url: `http://localhost:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('issue 50, item 3: another site\'s page cannot ride a link\'s cached password', function () {
  this.timeout(60_000);
  let t: TestServer;
  let shots: string;
  let browser: Browser | undefined;

  before(async () => {
    t = await sharedServer('pglite');
    shots = await mkdtemp(join(tmpdir(), 'dropstream-cross-site-'));
  });
  after(async () => {
    await browser?.close();
    await rm(join(shots, 'input.bin'), { force: true });
    if (browser) console.log(`      cross-site screenshots: ${shots}`);
  });

  const launch = async () =>
    (browser ??= await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] }));

  /** The service's URL for `path` with the visitor's password in it, as a browser is given it when it asks (the prompt's answer). */
  const withPassword = (path: string, password: string) => {
    const url = new URL(t.url(path));
    url.username = 'visitor';
    url.password = password;
    return url.toString();
  };

  const received = async (key: string, request: { request_id: string }) =>
    (await call(t.url(`/api/v1/requests/${request.request_id}`), { key })).body.files as unknown[];
  const downloads = async (key: string, fileId: number) => (await call(t.url(`/api/v1/files/${fileId}`), { key })).body.file.download_count as number;

  describe('writes under /r/', () => {
    let key: string;
    let request: any;
    before(async () => {
      key = (await t.account()).apiKey;
      request = await newRequest(t, key, { password: 'hunter22' });
    });

    const refused = (res: ApiResponse) => {
      expect(res.status, res.text).to.equal(403);
      expect(res.body.error.code).to.equal('cross_site_request');
    };

    it('when a plain upload says Sec-Fetch-Site cross-site or same-site, or names another Origin, then 403 cross_site_request, with no password checked', async () => {
      const before = derivations.count;
      const others: Record<string, string>[] = [
        { 'Sec-Fetch-Site': 'cross-site' },
        { 'Sec-Fetch-Site': 'same-site' },
        { Origin: 'http://attacker.example' },
        // Another port of the same host is another origin.
        { Origin: `http://127.0.0.1:${Number(new URL(t.server.url).port) + 1}` },
        // A page with Referrer-Policy no-referrer posts `Origin: null`: only the browser's word makes that our own page.
        { Origin: 'null' },
        { Origin: 'null', 'Sec-Fetch-Site': 'cross-site' },
      ];
      for (const headers of others) {
        // A wrong password: refused before it is checked, so neither 401 nor a guess counted.
        refused(await sendFile(t.server.url, request, 'planted.txt', 'x', { ...headers, Authorization: basic('wrong') }));
      }
      expect(derivations.count - before, 'passwords checked').to.equal(0);
      expect(await received(key, request)).to.have.length(0);
    });

    it('when a write names no Origin and no Sec-Fetch-Site (curl, tus clients), the service\'s own origin (PUBLIC_URL, or the Host it was sent to) or says same-origin, then it is served', async () => {
      const own: Record<string, string>[] = [
        {},
        { Origin: PUBLIC_URL },
        { Origin: t.server.url },
        { Origin: t.server.url, 'Sec-Fetch-Site': 'same-origin' },
        { Origin: 'null', 'Sec-Fetch-Site': 'same-origin' },
        { 'Sec-Fetch-Site': 'none' },
      ];
      for (const headers of own) {
        const res = await sendFile(t.server.url, request, 'ours.txt', 'x', { ...headers, Authorization: basic('hunter22') });
        expect(res.status, `${JSON.stringify(headers)}: ${res.text}`).to.equal(201);
      }
      expect(await received(key, request)).to.have.length(own.length);
    });

    it('when tus writes (POST, PATCH, DELETE) come from another site, then 403 cross_site_request; reads (HEAD, OPTIONS) are not refused', async () => {
      const uploads = `${t.url(linkPath(request))}/uploads`;
      const tus = { 'Tus-Resumable': '1.0.0', Authorization: basic('hunter22'), 'Upload-Metadata': `filename ${Buffer.from('a.txt').toString('base64')}` };
      refused(await call(uploads, { method: 'POST', headers: { ...tus, 'Upload-Length': '3', Origin: 'http://attacker.example' } }));
      const created = await call(uploads, { method: 'POST', headers: { ...tus, 'Upload-Length': '3', Origin: t.server.url } });
      expect(created.status, created.text).to.equal(201);
      const upload = new URL(created.headers.get('location')!, t.server.url).toString();
      refused(await call(upload, { method: 'PATCH', headers: { ...tus, 'Sec-Fetch-Site': 'cross-site', 'Upload-Offset': '0', 'Content-Type': 'application/offset+octet-stream' }, body: 'abc' }));
      refused(await call(upload, { method: 'DELETE', headers: { ...tus, 'Sec-Fetch-Site': 'cross-site' } }));
      const head = await call(upload, { method: 'HEAD', headers: { ...tus, 'Sec-Fetch-Site': 'cross-site' } });
      expect(head.status).to.equal(200);
      expect(head.headers.get('upload-offset')).to.equal('0');
      expect((await call(uploads, { method: 'OPTIONS', headers: { ...tus, 'Sec-Fetch-Site': 'cross-site' } })).status).to.equal(204);
    });

    it('when another site\'s upload announces 100 MB, then it is refused at once, before a byte of the body is read', async () => {
      const url = new URL(`${t.url(linkPath(request))}/files`);
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(url, {
          method: 'POST',
          headers: { 'Content-Type': 'multipart/form-data; boundary=x', 'Content-Length': String(100e6), 'Sec-Fetch-Site': 'cross-site', Authorization: basic('hunter22') },
        }, (response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (chunk) => (body += chunk)).on('end', () => resolve({ status: response.statusCode!, body }));
        });
        req.on('error', reject);
        // Headers only: the answer must not wait for the body.
        req.flushHeaders();
      });
      expect(res.status).to.equal(403);
      expect(JSON.parse(res.body).error.code).to.equal('cross_site_request');
    });
  });

  describe('password download links', () => {
    let key: string;
    let file: { file_id: number; link: string };
    before(async () => {
      key = (await t.account()).apiKey;
      const res = await upload(t.server.url, key, [{ name: 'password', content: 'open sesame' }, { name: 'file', filename: 'secret.txt', content: 'the secret' }]);
      expect(res.status).to.equal(201);
      file = { file_id: res.body.file_id, link: t.url(res.body.public_link) };
    });

    it('when another site\'s page embeds the link (an image, a frame, a fetch), then 403 cross_site_request and nothing is counted; a link followed from another site (a mail) is served', async () => {
      const before = derivations.count;
      for (const [mode, dest] of [['no-cors', 'image'], ['navigate', 'iframe'], ['no-cors', 'empty'], ['cors', 'empty'], ['no-cors', 'video']]) {
        for (const site of ['cross-site', 'same-site']) {
          const res = await get(file.link, { Authorization: basic('open sesame'), 'Sec-Fetch-Site': site, 'Sec-Fetch-Mode': mode!, 'Sec-Fetch-Dest': dest! });
          expect(res.status, `${site} ${mode} ${dest}`).to.equal(403);
          expect(res.code).to.equal('cross_site_request');
        }
      }
      expect(derivations.count - before, 'passwords checked').to.equal(0);
      expect(await downloads(key, file.file_id)).to.equal(0);
      const followed = await get(file.link, { ...CROSS_SITE, Authorization: basic('open sesame') });
      expect(followed.text).to.equal('the secret');
      const same = await get(file.link, { 'Sec-Fetch-Site': 'same-origin', 'Sec-Fetch-Mode': 'no-cors', 'Sec-Fetch-Dest': 'video', Authorization: basic('open sesame') });
      expect(same.text).to.equal('the secret');
      expect(await downloads(key, file.file_id)).to.equal(2);
    });

    it('when a link without a password is embedded by another site, then it is served as before', async () => {
      const res = await upload(t.server.url, key, [{ name: 'file', filename: 'open.txt', content: 'for all' }]);
      const got = await get(t.url(res.body.public_link), { 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'no-cors', 'Sec-Fetch-Dest': 'image' });
      expect(got.text).to.equal('for all');
    });
  });

  itWithChromium('when a visitor who opened a password request then visits another site whose page posts a form with a file to the link, then 403 and nothing is planted; the visitor\'s own upload through the page still works', async () => {
    const owner = await t.account();
    const request = await newRequest(t, owner.apiKey, { title: 'Tax papers', password: 'hunter22' });
    const target = `${t.url(linkPath(request))}/files`;
    const site = await otherSite(`<!DOCTYPE html><title>Cute cats</title><h1>Cute cats</h1>
<form id="f" method="post" enctype="multipart/form-data" action="${target}"><input type="file" name="file" id="file"></form>
<script>
const files = new DataTransfer();
files.items.add(new File(['planted by another site'], 'planted.txt', { type: 'text/plain' }));
document.getElementById('file').files = files.files;
document.getElementById('f').submit();
</script>`);
    const context = await (await launch()).newContext({ viewport: { width: 1000, height: 800 } });
    try {
      const page = await context.newPage();
      const sent: Record<string, string>[] = [];
      page.on('request', (req) => {
        if (req.url().startsWith(t.server.url) && req.method() !== 'GET') void req.allHeaders().then((headers) => sent.push({ method: req.method(), url: req.url(), ...headers }));
      });
      // The visitor answers the password prompt once; Chromium keeps it for the origin.
      await page.goto(withPassword(linkPath(request), 'hunter22'));
      await page.getByRole('heading', { name: 'Tax papers' }).waitFor();

      // Then another site's page submits a form to the link.
      const posted = page.waitForResponse((res) => res.url() === target && res.request().method() === 'POST');
      await page.goto(site.url);
      const answer = await posted;
      const attack = await answer.request().allHeaders();
      expect(attack.authorization, 'the browser sent the cached password').to.equal(basic('hunter22'));
      expect(answer.status(), await answer.text()).to.equal(403);
      expect(JSON.parse(await answer.text()).error.code).to.equal('cross_site_request');
      await page.screenshot({ path: join(shots, 'form-from-another-site.png') });
      expect(await received(owner.apiKey, request), 'files planted').to.have.length(0);

      // The visitor's own upload through the page (same origin: tus POST and PATCH carry our Origin) is stored.
      const content = randomBytes(300_000);
      const input = join(shots, 'input.bin');
      await writeFile(input, content);
      await page.goto(t.url(linkPath(request)));
      await page.locator('input.uppy-Dashboard-input').first().setInputFiles(input);
      await page.getByRole('list', { name: 'Files received' }).getByText('input.bin (293.0 KiB): done').waitFor({ timeout: 30_000 });
      await page.screenshot({ path: join(shots, 'own-upload.png'), fullPage: true });
      const writes = sent.filter((h) => h.url!.includes('/uploads'));
      expect(writes.map((h) => h.method)).to.include.members(['POST', 'PATCH']);
      // Our own Origin, not null, though the page's Referrer-Policy is no-referrer: plain http (no Sec-Fetch-Site) works too.
      for (const h of writes) expect([h.origin, h['sec-fetch-site']], `${h.method} ${h.url}`).to.deep.equal([t.server.url, 'same-origin']);
      expect(await eventually(() => received(owner.apiKey, request), (files) => files.length === 1)).to.have.length(1);
    } finally {
      await context.close();
      await site.close();
    }
  });

  itWithChromium('when a visitor who downloaded a password link then visits another site that embeds it (image, frame, video, fetch), then every answer is 403 before any password is asked, and nothing more is counted', async () => {
    const { apiKey } = await t.account();
    const res = await upload(t.server.url, apiKey, [{ name: 'password', content: 'open sesame' }, { name: 'file', filename: 'secret.txt', content: 'the secret' }]);
    const link = t.url(res.body.public_link);
    const context = await (await launch()).newContext({ acceptDownloads: true });
    try {
      const page = await context.newPage();
      const saved = page.waitForEvent('download');
      await page.goto(withPassword(new URL(link).pathname, 'open sesame')).catch(() => {}); // a download aborts the navigation
      await saved;
      expect(await downloads(apiKey, res.body.file_id)).to.equal(1);

      const site = await otherSite(`<!DOCTYPE html><title>Cute cats</title><h1>Cute cats</h1>
<img src="${link}" alt=""><iframe src="${link}"></iframe><video src="${link}"></video>
<script>fetch(${JSON.stringify(link)}, { mode: 'no-cors', credentials: 'include' }).catch(() => {});</script>`);
      try {
        // What reached the service, and how each embedding ended (Chromium's ORB blocks an image's or video's JSON answer: no response event).
        const answers: { type: string; status: number; authorization?: string }[] = [];
        const settled = new Set<string>();
        page.on('response', (answer) => {
          if (answer.url() !== link) return;
          const type = answer.request().resourceType();
          void answer.request().allHeaders().then((h) => {
            answers.push({ type, status: answer.status(), authorization: h.authorization });
            settled.add(type);
          });
        });
        page.on('requestfailed', (req) => {
          if (req.url() === link) settled.add(req.resourceType());
        });
        await page.goto(site.url);
        await eventually(async () => settled.size, (n) => n === 4, 20_000);
        await page.screenshot({ path: join(shots, 'embedded-by-another-site.png') });
        expect([...settled].sort()).to.deep.equal(['document', 'fetch', 'image', 'media']);
        // Chromium keeps the cached password from another site's embeddings itself; a browser that did not is refused all the same.
        expect(answers.filter((a) => a.authorization !== undefined), 'answers to requests with the password').to.deep.equal([]);
        // 403, not 401 with WWW-Authenticate: no password prompt for this service over another site's page.
        expect(answers.map((a) => `${a.type} ${a.status}`).sort()).to.deep.equal(['document 403', 'fetch 403']);
        expect(await downloads(apiKey, res.body.file_id)).to.equal(1);
      } finally {
        await site.close();
      }
    } finally {
      await context.close();
    }
  });
});
