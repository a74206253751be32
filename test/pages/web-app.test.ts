// The web app at /app (issue 46): headless Chromium signs in, uploads
// through Uppy and tus, sees the file and its link, survives a cut
// connection, revokes links; and the page loads nothing from elsewhere.
// Screenshots of each view land in a temporary folder, named in the output.
import { createHash, randomBytes } from 'node:crypto';
import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { pino } from 'pino';
import { SCOPES } from '../../src/accounts/scopes.js';
import { AUDIT_ACTIONS } from '../../src/audit/actions.js';
import { errorResponses } from '../../src/http/errors.js';
import { EVENT_TYPES } from '../../src/webhooks/events.js';
import { AUDIT_ACTIONS as WEB_AUDIT_ACTIONS, SCOPES as WEB_SCOPES, WEBHOOK_EVENTS as WEB_WEBHOOK_EVENTS } from '../../web/api-names.js';
import { APP_CSP, WEB_DIST } from '../../src/http/static-file.js';
import { webAppRoutes } from '../../src/pages/web-app.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { uploadFile } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { PUBLIC_URL, type TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

const MiB = 1024 * 1024;
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('web app (/app)', function () {
  this.timeout(60_000);
  let t: TestServer;
  let shots: string;
  let browser: Browser | undefined;

  before(async () => {
    t = await sharedServer('pglite');
    shots = await mkdtemp(join(tmpdir(), 'dropstream-web-app-'));
  });

  const inputs: string[] = [];
  after(async () => {
    await browser?.close();
    // The screenshots stay for a person to look at; the uploaded files go.
    await Promise.all(inputs.map((path) => rm(path, { force: true })));
    if (browser) console.log(`      web app screenshots: ${shots}`);
  });

  const launch = async () =>
    (browser ??= await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] }));

  /** A page at `origin` that records every request and every CSP complaint. */
  async function open(origin: string, width = 1100) {
    const context = await (await launch()).newContext({ viewport: { width, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    const page = await context.newPage();
    const requests: string[] = [];
    const complaints: string[] = [];
    page.on('request', (req) => requests.push(req.url()));
    page.on('console', (msg) => {
      if (/Content Security Policy|Refused to/i.test(msg.text())) complaints.push(msg.text());
    });
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`${origin}/app`);
    return { page, requests, complaints, close: () => context.close() };
  }

  async function signIn(page: Page, key: string) {
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  async function file(name: string, bytes: number): Promise<{ path: string; content: Buffer }> {
    const content = randomBytes(bytes);
    const path = join(shots, name);
    await writeFile(path, content);
    inputs.push(path);
    return { path, content };
  }

  /** Adds a file to Uppy's dashboard (its hidden file input), which uploads it at once. */
  const choose = (page: Page, path: string) => page.locator('input.uppy-Dashboard-input').first().setInputFiles(path);

  /** The public link the page shows for `name`, once the list has it. */
  async function listedLink(page: Page, name: string, ms = 40_000): Promise<string> {
    const row = page.locator('tr.file', { hasText: name });
    await row.waitFor({ timeout: ms });
    return (await row.locator('a.public-link').getAttribute('href'))!;
  }

  it('when /app is fetched, then HTML with a strict CSP, nosniff and hashed assets cached for a year', async () => {
    const res = await fetch(t.url('/app'));
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    expect(res.headers.get('content-security-policy')).to.equal(APP_CSP);
    expect(APP_CSP).to.include("default-src 'self'").and.include("frame-ancestors 'none'").and.not.include('unsafe');
    expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
    const html = await res.text();
    expect(html).to.not.match(/<script>|<style|\bstyle=/i);
    const assets = [...html.matchAll(/(?:src|href)="(\/app\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).to.have.length(2);
    for (const asset of assets) {
      expect(asset).to.match(/-[A-Z0-9]{8}\.(js|css)$/);
      const got = await fetch(t.url(asset));
      expect(got.status, asset).to.equal(200);
      expect(got.headers.get('cache-control'), asset).to.equal('public, max-age=31536000, immutable');
      expect(got.headers.get('x-content-type-options'), asset).to.equal('nosniff');
    }
    expect((await fetch(t.url('/app/assets/manifest.json'))).status).to.equal(404);
    expect((await fetch(t.url('/app/assets/..%2Fhttp%2Fserver.js'))).status).to.equal(404);
  });

  it('when the page is built, then its JS and CSS together are under 250 KB gzipped', async () => {
    const manifest = JSON.parse(await readFile(join(WEB_DIST, 'manifest.json'), 'utf8')) as { js: string; css: string };
    let total = 0;
    for (const name of [manifest.js, manifest.css]) total += gzipSync(await readFile(join(WEB_DIST, name)), { level: 9 }).length;
    expect(total).to.be.above(10_000).and.below(250 * 1024);
  });

  itWithChromium('when a wrong key is entered, then the page shows the API\'s own error and stays signed out', async () => {
    const { page, requests, close } = await open(t.server.url);
    try {
      // By keyboard alone: the field has the focus, Enter submits.
      await page.getByLabel('API key').waitFor();
      await page.keyboard.type('not-a-key');
      await page.keyboard.press('Enter');
      const alert = page.locator('#error');
      await alert.waitFor();
      expect(await alert.getAttribute('role')).to.equal('alert');
      expect(await alert.textContent()).to.match(/^401: .*API key/i);
      expect(await page.evaluate(() => sessionStorage.length)).to.equal(0);
      await page.screenshot({ path: join(shots, 'sign-in-error.png') });
      expect(requests.filter((url) => !url.startsWith(t.server.url))).to.deep.equal([]);
    } finally {
      await close();
    }
  });

  itWithChromium('when an owner opens the page, signs in and uploads 20 MiB, then it paints within 1 s, lists the file with its link, which downloads the same bytes, and nothing leaves the origin', async () => {
    const { apiKey } = await t.account();
    const { page, requests, complaints, close } = await open(t.server.url);
    try {
      await page.screenshot({ path: join(shots, 'sign-in.png') });
      // First render under 1 s (issue 46): the browser's own first-contentful-paint, from navigation start.
      const paint = await page.evaluate<number>("performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1");
      console.log(`      first contentful paint: ${paint.toFixed(0)} ms`);
      expect(paint).to.be.within(0, 1000);
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      expect(await page.evaluate(() => sessionStorage.getItem('dropstream.apiKey'))).to.equal(apiKey);
      const { path, content } = await file('twenty.bin', 20 * MiB);
      await choose(page, path);
      const link = await listedLink(page, 'twenty.bin');
      expect(link.startsWith(`${PUBLIC_URL}/download/`), link).to.equal(true);
      const res = await fetch(t.url(link));
      expect(res.status).to.equal(200);
      expect(sha(Buffer.from(await res.arrayBuffer()))).to.equal(sha(content));
      await page.getByText('Storage used: 20.0 MiB', { exact: false }).or(page.getByText('20.0 MiB (no limit)')).first().waitFor();
      const row = page.locator('tr.file', { hasText: 'twenty.bin' });
      await row.getByRole('button', { name: 'Copy link of twenty.bin' }).click();
      expect(await page.evaluate<string>('navigator.clipboard.readText()')).to.equal(link);
      await row.getByRole('button', { name: 'QR code of twenty.bin' }).click();
      await row.getByRole('img', { name: `QR code of ${link}` }).waitFor();
      await page.screenshot({ path: join(shots, 'files.png'), fullPage: true });
      expect(requests.filter((url) => !url.startsWith(t.server.url))).to.deep.equal([]);
      expect(complaints).to.deep.equal([]);
      // The uploads went through tus, with the key only in the header.
      expect(requests.some((url) => url.startsWith(`${t.server.url}/api/v1/uploads`))).to.equal(true);
      expect(requests.filter((url) => url.includes(apiKey))).to.deep.equal([]);
      // Sign out forgets the key.
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('API key').waitFor();
      expect(await page.evaluate(() => sessionStorage.getItem('dropstream.apiKey'))).to.equal(null);
    } finally {
      await close();
    }
  });

  itWithChromium('when the connection is cut mid-upload, then the upload resumes by itself and the file is whole', async () => {
    const { apiKey } = await t.account();
    // Once, after 8 MiB from the browser: the page itself came through the same proxy, so it is same-origin.
    const proxy = await startCuttingProxy(t.server.url, [8 * MiB]);
    const { page, requests, close } = await open(proxy.url);
    try {
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path, content } = await file('cut.bin', 20 * MiB);
      await choose(page, path);
      const link = await listedLink(page, 'cut.bin');
      expect(proxy.cuts()).to.equal(1);
      expect(sha(Buffer.from(await (await fetch(t.url(link))).arrayBuffer()))).to.equal(sha(content));
      // Resumed, not restarted: fewer than two whole copies crossed the proxy.
      expect(proxy.relayed()).to.be.below(2 * 20 * MiB);
      // tus asked where to go on from (HEAD is a request like any other to page.on('request')).
      expect(requests.filter((url) => url.includes('/api/v1/uploads/')).length).to.be.at.least(2);
    } finally {
      await close();
      await proxy.close();
    }
  });

  itWithChromium('when the page is reloaded mid-upload and the same file chosen again, then the upload goes on from where it stopped', async () => {
    const { apiKey } = await t.account();
    // The connection that passes 8 MiB hangs (relays nothing more); the reload ends it.
    const proxy = await startCuttingProxy(t.server.url, [], { stallAfter: 8 * MiB });
    const { page, close } = await open(proxy.url);
    try {
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path, content } = await file('reloaded.bin', 20 * MiB);
      await choose(page, path);
      await proxy.stalled();
      await page.reload();
      // Still signed in (sessionStorage outlives a reload), and tus finds the upload's URL in localStorage.
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      await choose(page, path);
      const link = await listedLink(page, 'reloaded.bin');
      expect(sha(Buffer.from(await (await fetch(t.url(link))).arrayBuffer()))).to.equal(sha(content));
      // A restart would have sent all 20 MiB again after the first 8.
      expect(proxy.relayed()).to.be.below(8 * MiB + 20 * MiB - 2 * MiB);
    } finally {
      await close();
      await proxy.close();
    }
  });

  itWithChromium('when a link is created and revoked, and the primary rotated, then the revoked links answer 404 and the file is listed with its new link, until it is deleted', async () => {
    const { apiKey } = await t.account();
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path } = await file('shared.txt', 1000);
      await choose(page, path);
      const primary = await listedLink(page, 'shared.txt');
      await page.getByRole('button', { name: 'Links of shared.txt' }).click();
      const panel = page.getByRole('region', { name: 'Links of shared.txt' });
      await panel.getByLabel('Max downloads').fill('3');
      await panel.getByRole('button', { name: 'Create link' }).click();
      const extra = panel.getByRole('listitem').filter({ hasText: '3 of 3 downloads left' });
      await extra.waitFor();
      const extraLink = (await extra.getByRole('link').getAttribute('href'))!;
      expect((await fetch(t.url(extraLink))).status).to.equal(200);
      await page.screenshot({ path: join(shots, 'links.png'), fullPage: true });
      await extra.getByRole('button', { name: /^Revoke/ }).click();
      await extra.waitFor({ state: 'detached' });
      expect((await fetch(t.url(extraLink))).status).to.equal(404);
      // Revoking the primary gives the file a new one, which the list then shows.
      await panel.getByRole('button', { name: /^Rotate/ }).click();
      const rotated = await eventually(() => listedLink(page, 'shared.txt'), (link) => link !== primary, 10_000);
      expect(rotated).to.not.equal(primary);
      expect((await fetch(t.url(primary))).status).to.equal(404);
      expect((await fetch(t.url(rotated))).status).to.equal(200);
      // Delete (the confirmation is accepted): the row goes, and so does the file's link.
      await page.getByRole('button', { name: 'Delete shared.txt' }).click();
      await page.getByText('No files yet').waitFor();
      expect((await fetch(t.url(rotated))).status).to.equal(404);
    } finally {
      await close();
    }
  });

  itWithChromium('when a file is over the plan\'s max_file_size, then the page shows the API\'s 403 from the tus request, not tus-js-client\'s sentence, and the storage bar', async () => {
    await t.plan('web-small', { api_access: true, requests_per_minute: 1_000_000, requests_per_day: 1_000_000, max_file_size: 1000, daily_uploads: 1000, max_total_size: 10 * MiB });
    const { apiKey } = await t.account('web-small');
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path } = await file('big.bin', 5000);
      await choose(page, path);
      // The page's own alert (Uppy's dashboard shows its own as well).
      const alert = page.locator('#error');
      await alert.waitFor();
      expect(await alert.textContent()).to.match(/^403: The file exceeds the plan's maximum file size/).and.not.include('tus:');
      // The plan has a storage limit: a bar (a labelled <meter>) shows what is used of it.
      const meter = page.getByRole('meter', { name: 'Storage used: 0 B of 10.0 MiB' }).or(page.getByLabel('Storage used: 0 B of 10.0 MiB'));
      expect(await meter.first().getAttribute('max')).to.equal(String(10 * MiB));
      await page.screenshot({ path: join(shots, 'upload-error.png'), fullPage: true });
    } finally {
      await close();
    }
  });

  itWithChromium('when the key is rotated while signed in, then the page signs out and shows the API\'s 401', async () => {
    const { accountId, apiKey } = await t.account();
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      await t.admin('POST', `/admin/accounts/${accountId}/keys`);
      // Once the API refuses the old key, a reload reads the list with it.
      await eventually(() => fetch(t.url('/api/v1/stats'), { headers: { Authorization: `Bearer ${apiKey}` } }).then((res) => res.status), (status) => status === 401);
      await page.reload();
      await page.getByLabel('API key').waitFor();
      expect(await page.locator('#error').textContent()).to.match(/^401: /);
      expect(await page.evaluate(() => sessionStorage.length)).to.equal(0);
    } finally {
      await close();
    }
  });

  itWithChromium('when the plan\'s requests per minute run out, then the page shows the API\'s 429 with its wait', async () => {
    // Signing in reads /stats (1), then the page reads its lists (files, requests, keys, activity) and /stats: the second of those is refused.
    await t.plan('web-slow', { api_access: true, requests_per_minute: 2, requests_per_day: 1000, max_file_size: 1000, daily_uploads: 1000 });
    const { apiKey } = await t.account('web-slow');
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      const alert = page.locator('#error');
      await alert.waitFor();
      expect(await alert.textContent()).to.match(/^429: .+ \(try again in \d+ s\)$/);
    } finally {
      await close();
    }
  });

  it('when the web app lists scopes, audit actions and webhook events, then they are the API\'s own', () => {
    expect(WEB_SCOPES).to.deep.equal(SCOPES);
    expect(WEB_AUDIT_ACTIONS).to.deep.equal(AUDIT_ACTIONS);
    expect(WEB_WEBHOOK_EVENTS).to.deep.equal(EVENT_TYPES);
  });

  it('when dist/web was never built, then /app answers 404 naming the command to run', async () => {
    const app = new Koa();
    app.use(errorResponses(pino({ level: 'silent' })));
    app.use(webAppRoutes(join(shots, 'no-build')).routes());
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/app`);
      expect(res.status).to.equal(404);
      expect(((await res.json()) as { error: { message: string } }).error.message).to.include('npm run build');
    } finally {
      server.close();
    }
  });

  itWithChromium('when an account has more files than a page, then the newest come first and Next page shows the rest', async () => {
    const { apiKey } = await t.account();
    // One at a time, so each is created after the one before (the list orders by creation time).
    for (let i = 1; i <= 12; i += 1) expect((await uploadFile(t.server.url, apiKey, `n${String(i).padStart(2, '0')}.txt`, `file ${i}`)).status).to.equal(201);
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      const names = () => page.locator('tr.file td.name').allTextContents();
      await page.getByText('Page 1 of 2 (12 files)').waitFor();
      expect(await names()).to.deep.equal(['n12.txt', 'n11.txt', 'n10.txt', 'n09.txt', 'n08.txt', 'n07.txt', 'n06.txt', 'n05.txt', 'n04.txt', 'n03.txt']);
      expect(await page.getByRole('button', { name: 'Previous page' }).isDisabled()).to.equal(true);
      await page.getByRole('button', { name: 'Next page' }).click();
      await page.getByText('Page 2 of 2 (12 files)').waitFor();
      expect(await names()).to.deep.equal(['n02.txt', 'n01.txt']);
      expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).to.equal(true);
    } finally {
      await close();
    }
  });

  itWithChromium('when an owner creates a key with two scopes in the Keys section, then its secret is shown once with a copy button, the key works with just those scopes, and Revoke (confirmed) ends it', async () => {
    const { apiKey } = await t.account();
    const { page, complaints, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      const keys = page.getByRole('region', { name: 'Keys' });
      // The key signed in with is listed, marked as this one.
      await keys.locator('tr.key', { hasText: 'this key' }).waitFor();
      await keys.getByLabel('Key name').fill('CI uploads');
      await keys.getByRole('checkbox', { name: 'files:write' }).check();
      await keys.getByRole('checkbox', { name: 'stats:read' }).check();
      await keys.getByLabel('Expires in (days)').fill('30');
      await keys.getByRole('button', { name: 'Create key' }).click();
      const shown = keys.getByRole('region', { name: 'New key' });
      const secret = (await shown.locator('code').textContent())!;
      const row = keys.locator('tr.key', { hasText: 'CI uploads' });
      await row.waitFor();
      expect(await row.textContent()).to.include('files:write, stats:read');
      const prefix = (await row.locator('td[data-label="Prefix"]').textContent())!;
      expect(secret.startsWith(prefix), `${secret} starts with ${prefix}`).to.equal(true);
      expect(await row.locator('td[data-label="Expires (UTC)"]').textContent()).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      await shown.getByRole('button', { name: 'Copy key' }).click();
      expect(await page.evaluate<string>('navigator.clipboard.readText()')).to.equal(secret);
      await keys.screenshot({ path: join(shots, 'keys.png') });
      // The new key holds what was checked, and nothing more.
      const as = (key: string, path: string) => fetch(t.url(`/api/v1${path}`), { headers: { Authorization: `Bearer ${key}` } }).then((res) => res.status);
      expect(await as(secret, '/stats')).to.equal(200);
      expect(await as(secret, '/files')).to.equal(403);
      // Shown once: Done removes it, and a reload does not bring it back.
      await shown.getByRole('button', { name: 'Done' }).click();
      await shown.waitFor({ state: 'detached' });
      await page.reload();
      await keys.locator('tr.key', { hasText: 'CI uploads' }).waitFor();
      expect(await page.content()).to.not.include(secret);
      await keys.getByRole('button', { name: 'Revoke CI uploads' }).click();
      await keys.locator('tr.key', { hasText: 'CI uploads' }).waitFor({ state: 'detached' });
      expect(await eventually(() => as(secret, '/stats'), (status) => status === 401)).to.equal(401);
      expect(complaints).to.deep.equal([]);
    } finally {
      await close();
    }
  });

  itWithChromium('when keys are made and revoked and a file uploaded, then the Activity section lists them newest first, by whom, and filters by action', async () => {
    const { apiKey } = await t.account();
    const made = await fetch(t.url('/api/v1/keys'), { method: 'POST', headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'backup', scopes: ['files:read'] }) });
    const { key } = (await made.json()) as { key: { key_id: string; api_key: string } };
    expect((await fetch(t.url(`/api/v1/keys/${key.key_id}`), { method: 'DELETE', headers: { Authorization: `Bearer ${apiKey}` } })).status).to.equal(200);
    expect((await uploadFile(t.server.url, apiKey, 'audited.txt', 'hello')).status).to.equal(201);
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      const activity = page.getByRole('region', { name: 'Activity' });
      const actions = () => activity.locator('tr.event td[data-label="Action"]').allTextContents();
      await activity.getByText('3 events').waitFor();
      expect(await actions()).to.deep.equal(['file.uploaded', 'key.revoked', 'key.created']);
      const revoked = activity.locator('tr.event', { hasText: 'key.revoked' });
      expect(await revoked.locator('td[data-label="Subject"]').textContent()).to.equal(key.key_id);
      expect(await revoked.locator('td[data-label="From"]').textContent()).to.match(/^127\.0\.0\.0\/24$/);
      expect(await revoked.locator('td[data-label="By"]').textContent()).to.match(/^key /);
      await activity.screenshot({ path: join(shots, 'activity.png') });
      await activity.getByLabel('Action').selectOption('key.created');
      await activity.getByText(/\(1 event\)/).waitFor();
      expect(await actions()).to.deep.equal(['key.created']);
    } finally {
      await close();
    }
  });

  itWithChromium('when an owner adds a webhook for two events in the Webhooks section, then its secret is shown once, Rotate secret shows a new one, and Remove (confirmed) ends it, each in the activity', async () => {
    const { apiKey } = await t.account();
    const listed = async () => ((await (await fetch(t.url('/api/v1/webhooks'), { headers: { Authorization: `Bearer ${apiKey}` } })).json()) as { webhooks: { url: string; events: string[] }[] }).webhooks;
    const { page, complaints, close } = await open(t.server.url);
    try {
      await signIn(page, apiKey);
      const webhooks = page.getByRole('region', { name: 'Webhooks' });
      await webhooks.getByText('No webhooks.').waitFor();
      await webhooks.getByLabel('Webhook URL').fill('https://hooks.example.com/in');
      for (const event of ['file.downloaded', 'link.exhausted', 'upload.expired']) await webhooks.getByRole('checkbox', { name: event }).uncheck();
      await webhooks.getByRole('button', { name: 'Add webhook' }).click();
      const shown = webhooks.getByRole('region', { name: 'Webhook secret' });
      const secret = (await shown.locator('code').textContent())!;
      expect(secret).to.match(/^whsec_/);
      await shown.getByRole('button', { name: 'Copy secret' }).click();
      expect(await page.evaluate<string>('navigator.clipboard.readText()')).to.equal(secret);
      const item = webhooks.locator('li.webhook', { hasText: 'https://hooks.example.com/in' });
      expect(await item.textContent()).to.include('file.uploaded, file.deleted').and.include('active');
      expect((await listed()).map(({ url, events }) => ({ url, events }))).to.deep.equal([{ url: 'https://hooks.example.com/in', events: ['file.uploaded', 'file.deleted'] }]);
      // The form is ready for the next one: every event checked again.
      expect(await webhooks.getByRole('checkbox', { name: 'upload.expired' }).isChecked()).to.equal(true);
      await webhooks.screenshot({ path: join(shots, 'webhooks.png') });
      await item.getByRole('button', { name: 'Rotate secret of https://hooks.example.com/in' }).click();
      await shown.locator('code', { hasNotText: secret }).waitFor();
      await shown.getByRole('button', { name: 'Done' }).click();
      await item.getByRole('button', { name: 'Remove https://hooks.example.com/in' }).click();
      await webhooks.getByText('No webhooks.').waitFor();
      expect(await listed()).to.deep.equal([]);
      const activity = page.getByRole('region', { name: 'Activity' });
      await activity.getByText('(3 events)').waitFor();
      expect(await activity.locator('tr.event td[data-label="Action"]').allTextContents()).to.deep.equal(['webhook.deleted', 'webhook.secret_rotated', 'webhook.created']);
      expect(complaints).to.deep.equal([]);
    } finally {
      await close();
    }
  });

  itWithChromium('when the key signed in with lacks keys:write, webhooks:write and audit:read, then those sections say so with the API\'s words and the page raises no alert', async () => {
    const { apiKey } = await t.account();
    const made = await fetch(t.url('/api/v1/keys'), { method: 'POST', headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'narrow', scopes: ['stats:read', 'files:read', 'requests:write'] }) });
    const { key } = (await made.json()) as { key: { api_key: string } };
    const { page, close } = await open(t.server.url);
    try {
      await signIn(page, key.api_key);
      await page.getByText(/^This key cannot manage keys \(.*keys:write/).waitFor();
      await page.getByText(/^This key cannot manage webhooks \(.*webhooks:write/).waitFor();
      await page.getByText(/^This key cannot read the activity \(.*audit:read/).waitFor();
      await page.getByText('No files yet').waitFor();
      await page.getByText('No open requests.').waitFor();
      expect(await page.getByRole('button', { name: 'Create key' }).isVisible()).to.equal(false);
      expect(await page.locator('#error').isHidden()).to.equal(true);
    } finally {
      await close();
    }
  });

  itWithChromium('when the page is 375 px wide, then the files and the account fit without sideways scrolling', async () => {
    const { apiKey } = await t.account();
    const { page, close } = await open(t.server.url, 375);
    try {
      await signIn(page, apiKey);
      await page.getByRole('heading', { name: 'Files' }).waitFor();
      const { path } = await file('phone-sized-name-that-is-rather-long.txt', 500);
      await choose(page, path);
      await listedLink(page, 'phone-sized-name-that-is-rather-long.txt');
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      await page.screenshot({ path: join(shots, 'phone.png'), fullPage: true });
      expect(overflow).to.be.at.most(0);
    } finally {
      await close();
    }
  });
});
