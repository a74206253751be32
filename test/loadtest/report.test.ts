// The loadtest's HTML report opened in headless Chromium (Debian's package,
// driven by playwright-core): the verdict on top in red or green, every chart
// draws (coloured series pixels in a screenshot of its area), one latency
// chart per request kind, legends without uPlot's hover placeholder "--", and
// the page asks the network for nothing.
// Also: the thresholds fail the exit code when broken.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { chromium, type Browser } from 'playwright-core';
import { PNG } from 'pngjs';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeDir, runLoadtest } from './run.js';

/** An element's computed background colour, in the page (this project compiles without the DOM's types). */
const background = (el: unknown) => (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle(el).backgroundColor;

/** Pixels clearly coloured (a series line), not the white, grey or black of background, grid and axes. */
function colouredPixels(png: Buffer): number {
  const { data, width, height } = PNG.sync.read(png);
  let n = 0;
  for (let i = 0; i < width * height * 4; i += 4) {
    const [r, g, b] = [data[i]!, data[i + 1]!, data[i + 2]!];
    if (Math.max(r, g, b) - Math.min(r, g, b) > 60) n += 1;
  }
  return n;
}

describe('dropstream loadtest: report and thresholds', function () {
  this.timeout(60_000);
  let t: TestServer;
  let key: string;
  let browser: Browser | undefined;
  let profile: string;
  before(async () => {
    t = await startTestServer('pglite');
    ({ apiKey: key } = await t.account());
    profile = await mkdtemp(join(tmpdir(), 'dropstream-chromium-'));
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await rm(profile, { recursive: true, force: true });
  });

  itWithChromium('when the HTML report is opened in headless Chromium, then the verdict is on top in its colour, every chart draws, latency is one chart per kind, no legend shows "--", and the page makes no network request', async function () {
    const { summary, dir } = await runLoadtest(t, key, ['mixed', '--concurrency', '2', '--count', '40', '--size', `${128 * 1024}`, '--duration', '10s', '--slow-clients', '1', '--slow-rate', `${256 * 1024}`]);
    // The same kind of run with a threshold it must break: the verdict turns red.
    const failed = await runLoadtest(t, key, ['metadata', '--count', '3', '--rate', '50', '--size', '1000', '--concurrency', '1', '--max-p99-ms', '0.001']);
    try {
      expect(summary.server.scrapes).to.be.at.least(2);
      expect(summary.verdict.ok).to.equal(true);
      expect(failed.summary.verdict.ok).to.equal(false);
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
        viewport: { width: 1000, height: 1400 },
      });
      browser = context.browser() ?? undefined;
      const page = await context.newPage();
      const requests: string[] = [];
      context.on('request', (req) => requests.push(req.url()));
      const reportUrl = pathToFileURL(join(dir, 'report.html')).href;
      await page.goto(reportUrl);
      await page.waitForSelector('body[data-rendered="true"]', { timeout: 10_000 });
      const verdict = page.locator('#verdict');
      expect(await verdict.evaluate(background)).to.equal('rgb(21, 128, 61)');
      expect(await verdict.innerText()).to.equal(`PASS: ${summary.verdict.headline}`);
      expect(await page.evaluate('document.body.firstElementChild.id'), 'the verdict comes first').to.equal('verdict');
      for (const id of ['throughput', 'outcomes', 'statuses', 'rss', 'inflight']) {
        const area = page.locator(`#${id}`);
        expect(await area.locator('canvas').count(), `#${id} has a chart`).to.equal(1);
        const pixels = colouredPixels(await area.locator('canvas').screenshot());
        expect(pixels, `coloured pixels in #${id}`).to.be.above(50);
      }
      const timed = Object.entries(summary.kinds as Record<string, { requests: number; throttled: number }>).filter(([, k]) => k.requests > k.throttled).map(([kind]) => kind);
      const charts = page.locator('#latency .latency-chart');
      expect(await charts.evaluateAll((els) => els.map((el) => (el as unknown as { dataset: { kind: string } }).dataset.kind)), 'one latency chart per kind').to.deep.equal(timed.sort());
      for (let i = 0; i < timed.length; i++) {
        expect(await charts.nth(i).locator('canvas').count()).to.equal(1);
        expect(await charts.nth(i).locator('.u-legend .u-label').allInnerTexts()).to.deep.equal(['p50', 'p99']);
      }
      const legends = await page.locator('.u-legend').allInnerTexts();
      expect(legends.length).to.be.at.least(5 + timed.length);
      for (const legend of legends) expect(legend, 'a legend').to.not.include('--');
      await page.evaluate('window.scrollTo(0, 0)');
      await page.screenshot({ path: join(tmpdir(), 'dropstream-loadtest-report.png'), fullPage: true });

      await page.goto(pathToFileURL(join(failed.dir, 'report.html')).href);
      await page.waitForSelector('body[data-rendered="true"]', { timeout: 10_000 });
      expect(await page.locator('#verdict').evaluate(background)).to.equal('rgb(185, 28, 28)');
      expect(await page.locator('#verdict').innerText()).to.match(/^FAIL: thresholds broken: p99 .* > --max-p99-ms 0.001$/);
      expect(requests.filter((url) => !url.endsWith('/report.html')), 'requests the page made').to.deep.equal([]);
      await context.close();
      browser = undefined;
    } finally {
      await removeDir(dir);
      await removeDir(failed.dir);
    }
  });

  it('when a threshold is broken, then the exit code is 1 and the summary names it; when none is, 0', async () => {
    const base = ['metadata', '--count', '3', '--rate', '50', '--size', '1000', '--concurrency', '1'];
    const ok = await runLoadtest(t, key, [...base, '--max-p99-ms', '60000', '--max-rss-mib', '100000', '--max-error-rate', '0']);
    await removeDir(ok.dir);
    expect(ok.code).to.equal(0);
    expect(ok.summary.thresholds.broken).to.deep.equal([]);

    const slow = await runLoadtest(t, key, [...base, '--max-p99-ms', '0.001']);
    await removeDir(slow.dir);
    expect(slow.code).to.equal(1);
    expect(slow.summary.thresholds.broken.join()).to.match(/^p99 .* > --max-p99-ms 0.001$/);

    const rss = await runLoadtest(t, key, [...base, '--max-rss-mib', '1']);
    await removeDir(rss.dir);
    expect(rss.code).to.equal(1);
    expect(rss.summary.thresholds.broken.join()).to.match(/server RSS .* > --max-rss-mib 1$/);

    // A revoked key: every answer is 401, an error rate of 1.
    const revoked = await runLoadtest(t, 'not-a-key', [...base, '--max-error-rate', '0.5']);
    await removeDir(revoked.dir);
    expect(revoked.code).to.equal(1);
    expect(revoked.summary.errorRate).to.equal(1);
    expect(revoked.summary.thresholds.broken.join()).to.match(/error rate 1.0000 > --max-error-rate 0.5/);
  });
});
