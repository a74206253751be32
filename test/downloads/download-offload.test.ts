// Downloads offloaded to the store (S3_PRESIGNED_DOWNLOADS, issue 41): a
// GET of the whole file through an unlimited link without a password
// answers 302 to a presigned GetObject URL that makes the store answer with
// our Content-Disposition and type; HEAD, part of the file, links with
// max_downloads or a password (issue 50: a URL works for anyone, for the
// whole file) are served by the server and never reach the store. Against
// s3rver in this process (or TEST_S3_ENDPOINT), with curl -L, wget and
// headless Chromium following the redirect as users' clients do, and a
// <video> seeking through it.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { chromium } from 'playwright-core';
import { attachment } from '../../src/downloads/attachment.js';
import { CHROMIUM, itWithChromium } from '../helpers/chromium.js';
import { call, upload } from '../helpers/client.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const run = promisify(execFile);
const bin = fileURLToPath(new URL('../../bin/dropstream.js', import.meta.url));
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const NAME = 'résumé – final.pdf';

/** A WAV file (16-bit PCM, 48 kHz stereo: 192,000 bytes a second) of `seconds` of a 440 Hz tone: media Chromium plays and seeks in by byte offset. */
function wav(seconds: number) {
  const rate = 48_000;
  const channels = 2;
  const data = rate * channels * 2 * seconds;
  const out = Buffer.alloc(44 + data);
  out.write('RIFF', 0);
  out.writeUInt32LE(36 + data, 4);
  out.write('WAVEfmt ', 8);
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20);
  out.writeUInt16LE(channels, 22);
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * channels * 2, 28);
  out.writeUInt16LE(channels * 2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36);
  out.writeUInt32LE(data, 40);
  for (let i = 0; i < rate * seconds; i++) {
    const sample = Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000);
    out.writeInt16LE(sample, 44 + i * 4);
    out.writeInt16LE(sample, 46 + i * 4);
  }
  return out;
}

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

  async function uploadWith(options: Record<string, string> = {}, bytes = content, filename = NAME): Promise<{ file_id: number; link: string }> {
    const res = await upload(t.server.url, key, [...Object.entries(options).map(([name, value]) => ({ name, content: value })), { name: 'file', filename, content: bytes }]);
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

  it('when part of the file is fetched, then the server sends those bytes itself (206, no Location: a URL would give the whole file, uncounted) and counts no download', async () => {
    const file = await uploadWith();
    for (const [range, start, end] of [['10-10', 10, 10], ['1000-1999', 1000, 1999], ['-500', content.length - 500, content.length - 1]] as const) {
      const got = await curl(file.link, ['-L', '-r', range]);
      expect(got.statuses, range).to.deep.equal([206]);
      expect(got.headers.toLowerCase()).to.not.include('location:');
      expect(got.headers.toLowerCase()).to.include(`content-range: bytes ${start}-${end}/${content.length}`);
      expect(got.body.equals(content.subarray(start, end + 1)), range).to.equal(true);
    }
    expect(await downloads(file.file_id)).to.equal(0);
  });

  it('when a range covers the whole file (bytes=0-, a <video>\'s first request), then it is redirected and counted as a whole download', async () => {
    const file = await uploadWith();
    const got = await curl(file.link, ['-L', '-r', '0-']);
    expect(got.statuses).to.deep.equal([302, 206]);
    expect(sha(got.body)).to.equal(sha(content));
    expect(await downloads(file.file_id)).to.equal(1);
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

  it('when the link has a password, then it is never offloaded: none or a wrong one gets 401, the right one the bytes from the server, counted, and no URL that works without it', async () => {
    const file = await uploadWith({ password: 'open sesame' });
    for (const args of [[], ['-u', ':wrong']]) {
      const refused = await curl(file.link, ['-L', ...args]);
      expect(refused.statuses).to.deep.equal([401]);
      expect(refused.headers.toLowerCase()).to.not.include('location:');
    }
    const got = await curl(file.link, ['-L', '-u', ':open sesame']);
    expect(got.statuses).to.deep.equal([200]);
    expect(got.headers.toLowerCase()).to.not.include('location:');
    expect(sha(got.body)).to.equal(sha(content));
    const part = await curl(file.link, ['-L', '-u', ':open sesame', '-r', '0-']);
    expect(part.statuses).to.deep.equal([206]);
    expect(await downloads(file.file_id)).to.equal(2);
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

  it('when `dropstream download` fetches a password link, then the server sends the bytes (no redirect) and it saves the exact name and bytes', async () => {
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
  itWithChromium('when a <video> plays a link and seeks near its end, then it plays on from there: the first request (bytes=0-) is redirected and counted, the later ranges are answered with their bytes', async () => {
    const seconds = 90;
    const media = wav(seconds);
    const file = await uploadWith({}, media, 'tone.wav');
    const store = new URL(s3.endpoint.replace('127.0.0.1', 'localhost')).origin;
    const shots = await mkdtemp(join(tmpdir(), 'dropstream-offload-video-'));
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--autoplay-policy=no-user-gesture-required'] });
    try {
      const page = await browser.newPage({ viewport: { width: 800, height: 300 } });
      // Every media request to the server or the store: where it went, the range it asked for and how it was answered.
      const seen: { where: string; range: string; status: number }[] = [];
      page.on('response', (res) => {
        const url = res.url();
        const where = url === file.link ? 'server' : url.startsWith(store) ? 'store' : '';
        if (where) void res.request().allHeaders().then((h) => seen.push({ where, range: h.range ?? '', status: res.status() }));
      });
      await page.setContent(`<video id="v" controls preload="metadata" muted src="${file.link}" style="width: 760px; height: 80px"></video>`);
      // Strings, not functions: the test files are compiled without the DOM's types.
      const failed = "video.addEventListener('error', () => reject(new Error('media error ' + video.error.code + ': ' + video.error.message)), { once: true });";
      const duration = await page.evaluate<number>(`new Promise((resolve, reject) => {
        const video = document.getElementById('v');
        ${failed}
        if (video.readyState >= 1) resolve(video.duration);
        video.addEventListener('loadedmetadata', () => resolve(video.duration), { once: true });
      })`);
      expect(duration).to.be.closeTo(seconds, 0.5);

      const target = seconds - 10;
      // Played on from the new position: the bytes there were fetched and decoded.
      const after = await page.evaluate<number>(`new Promise((resolve, reject) => {
        const video = document.getElementById('v');
        ${failed}
        video.addEventListener('seeked', () => {
          const moved = () => (video.currentTime > ${target + 0.5} ? resolve(video.currentTime) : setTimeout(moved, 50));
          video.play().then(moved, reject);
        }, { once: true });
        video.currentTime = ${target};
      })`);
      expect(after).to.be.within(target + 0.5, seconds);
      await page.evaluate("document.getElementById('v').pause()");
      await page.screenshot({ path: join(shots, 'video-seeked.png') });

      const first = seen[0]!;
      expect(first, JSON.stringify(seen)).to.deep.include({ where: 'server', range: 'bytes=0-', status: 302 });
      // The seek asked for bytes near the target; whoever answered, it was 206 with them.
      const byteOf = (range: string) => Number(/^bytes=(\d+)-/.exec(range)?.[1] ?? -1);
      const seek = seen.filter((r) => byteOf(r.range) >= 44 + 192_000 * (target - 5));
      expect(seek, JSON.stringify(seen)).to.not.deep.equal([]);
      for (const r of seek) expect(r.status, JSON.stringify(seen)).to.equal(206);
      // Chromium sends its later ranges to the URL it was redirected to, not to the link: why a URL with one range signed into it would not do (a store that checks signatures would refuse every seek).
      expect(seek.map((r) => r.where), JSON.stringify(seen)).to.include('store');
      // Never a part of the file through a URL that gives the whole: the server answered every range but the whole file's.
      for (const r of seen.filter((r) => r.where === 'server' && byteOf(r.range) > 0)) expect(r.status, JSON.stringify(seen)).to.equal(206);
      expect(await downloads(file.file_id), JSON.stringify(seen)).to.be.at.least(1);
      console.log(`      media requests: ${JSON.stringify(seen)}; screenshot: ${join(shots, 'video-seeked.png')}`);
    } finally {
      await browser.close();
    }
  });
});
