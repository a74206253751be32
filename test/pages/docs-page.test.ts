// Issue 50, item 10: /docs is on the web app's origin, so it gets the web
// app's CSP (no inline script: Swagger UI's start is a file of its own) and
// may not be framed. Headless Chromium renders it under that policy without
// a complaint, and refuses to show it in another site's frame.
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { chromium } from 'playwright-core';
import { APP_CSP } from '../../src/http/static-file.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { call } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

describe('issue 50, item 10: /docs under the web app\'s CSP', function () {
  this.timeout(60_000);
  let t: TestServer;
  before(async () => {
    t = await sharedServer('pglite');
  });

  it('when /docs is fetched, then it carries the web app\'s CSP (frame-ancestors \'none\', no inline script) and the page has no inline script', async () => {
    const res = await call(t.url('/docs'));
    expect(res.status).to.equal(200);
    const csp = res.headers.get('content-security-policy');
    expect(csp).to.equal(APP_CSP);
    expect(csp).to.include("frame-ancestors 'none'");
    expect(csp).to.not.include('unsafe-inline');
    // Every script is a file of ours.
    const scripts = [...res.text.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
    expect(scripts).to.have.length(2);
    for (const [, attributes, body] of scripts) {
      expect(attributes).to.match(/\bsrc="\/docs\/assets\/[\w.-]+"/);
      expect(body).to.equal('');
    }
    const init = await call(t.url('/docs/assets/init.js'));
    expect(init.headers.get('content-type')).to.match(/^text\/javascript/);
    expect(init.text).to.match(/SwaggerUIBundle\(\{ url: '\/api\/v1\/openapi\.json'/);
  });

  itWithChromium('when Chromium opens /docs, then Swagger UI renders the operations with no CSP complaint; in another site\'s frame it is refused', async () => {
    const shots = await mkdtemp(join(tmpdir(), 'dropstream-docs-'));
    // Another site (localhost, not 127.0.0.1) that frames the docs.
    const site = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!DOCTYPE html><h1>Not the docs</h1><iframe id="docs" src="${t.url('/docs')}" width="800" height="400"></iframe>`);
    });
    site.listen(0);
    await once(site, 'listening');
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
      const complaints: string[] = [];
      page.on('console', (msg) => {
        if (/Content Security Policy|Refused to/i.test(msg.text())) complaints.push(msg.text());
      });
      page.on('pageerror', (err) => complaints.push(String(err)));
      await page.goto(t.url('/docs'));
      await page.locator('.opblock-summary-path', { hasText: '/files/upload' }).first().waitFor({ timeout: 30_000 });
      // An operation opens (Swagger UI's own script at work under the policy).
      await page.locator('.opblock-summary', { hasText: '/files/upload' }).first().click();
      await page.getByRole('button', { name: 'Try it out' }).first().waitFor();
      await page.screenshot({ path: join(shots, 'docs.png') });
      expect(complaints).to.deep.equal([]);

      const framing = await browser.newPage();
      const refused: string[] = [];
      framing.on('console', (msg) => {
        if (/frame-ancestors/.test(msg.text())) refused.push(msg.text());
      });
      await framing.goto(`http://localhost:${(site.address() as AddressInfo).port}/`);
      await framing.getByRole('heading', { name: 'Not the docs' }).waitFor();
      const frame = framing.frames().find((f) => f !== framing.mainFrame());
      // Chromium leaves the frame on its error page: nothing of the docs is drawn.
      await frame?.waitForLoadState();
      expect(await frame?.locator('#swagger-ui').count()).to.equal(0);
      await framing.screenshot({ path: join(shots, 'docs-framed.png') });
      expect(refused.join('\n')).to.match(/frame-ancestors 'none'/);
      console.log(`      docs screenshots: ${shots}`);
    } finally {
      await browser.close();
      site.close();
    }
  });
});
