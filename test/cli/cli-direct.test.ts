// `dropstream upload` straight to the store (issue 55, docs/direct-uploads.md):
// against a server with S3_DIRECT_UPLOADS on s3rver, the compiled CLI
// (bin/dropstream.js -> dist/, so `npm run build` first) in a child process.
// The part URLs are signed for an S3 proxy (S3_PUBLIC_ENDPOINT) that sees
// every request the CLI makes to the store, and can hold parts unanswered so
// an upload is mid-way when it is interrupted.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { envWithoutConfig, repoRoot, runToExit } from '../helpers/run-to-exit.js';
import { isUploadPart, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';

const bin = join(repoRoot, 'bin', 'dropstream.js');
const MiB = 1024 * 1024;
/** The store's least part: the file below is 7 parts of it, the last short. */
const PART = 5 * MiB;

/** Where upload remembers unfinished uploads (XDG_CACHE_HOME): this run's own. */
const cacheHome = join(tmpdir(), `dropstream-direct-cache-${process.pid}`);
const baseEnv = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_') || name === 'ADMIN_URL' || name === 'XDG_CACHE_HOME'), XDG_CACHE_HOME: cacheHome };

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const partNumber = (req: { url?: string }) => Number(/[?&]partNumber=(\d+)/.exec(req.url ?? '')?.[1]);
/** The part numbers of the part PUTs the store received from index `from` on. */
const partsPut = (proxy: S3Proxy, from = 0) => proxy.received.slice(from).filter(isUploadPart).map(partNumber).sort((a, b) => a - b);

/** The direct upload the CLI remembers for `path` (its URL on the server), if any. */
async function rememberedUpload(path: string): Promise<string | undefined> {
  const all: Record<string, { uploadUrl: string }> = JSON.parse(await readFile(join(cacheHome, 'dropstream', 'uploads.json'), 'utf8').catch(() => '{}'));
  return Object.entries(all).find(([key]) => key.startsWith('direct::') && key.includes(` ${path} `))?.[1].uploadUrl;
}

/** Polls until `check` resolves to something, or fails after `ms`. */
async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('dropstream upload straight to the store', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let dir: string;

  before(async () => {
    s3 = await startTestS3();
    proxy = await startS3Proxy(s3.endpoint);
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('direct-cli')), S3_DIRECT_UPLOADS: 'true', S3_PUBLIC_ENDPOINT: proxy.endpoint });
    dir = await mkdtemp(join(tmpdir(), 'dropstream-direct-'));
  });

  after(async () => {
    await t?.close();
    await proxy?.close();
    await s3?.close();
    await Promise.all([dir, cacheHome].filter(Boolean).map((d) => rm(d, { recursive: true, force: true })));
  });

  afterEach(() => {
    proxy.hold(undefined);
    proxy.drop();
  });

  /** A file of 6 whole parts and a short seventh. */
  async function file(name: string): Promise<{ path: string; data: Buffer }> {
    const path = join(dir, name);
    const data = randomBytes(6 * PART + 1000);
    await writeFile(path, data);
    return { path, data };
  }

  async function download(link: string, apiKey: string): Promise<Buffer> {
    const res = await fetch(t.url(link), { headers: { Authorization: `Bearer ${apiKey}` } });
    expect(res.status).to.equal(200);
    return Buffer.from(await res.arrayBuffer());
  }

  it('when the server offers direct uploads, then upload sends a file of 7 parts to the store, not through the server, and the download is byte-identical', async () => {
    const { apiKey } = await t.account();
    const { path, data } = await file('whole.bin');
    const before = proxy.received.length;
    const run = await runToExit([bin, 'upload', path, '--server', t.server.url, '--key', apiKey, '--part-size', '5MiB'], { env: baseEnv, deadlineMs: 60_000 });
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stderr).to.equal('');
    // Each part once, straight to the store.
    expect(partsPut(proxy, before)).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
    expect(sha256(await download(run.stdout.trim(), apiKey))).to.equal(sha256(data));
    expect(await rememberedUpload(path)).to.equal(undefined);
  });

  it('when the store cuts a part twice, then that part is sent again after 1 s and 2 s, each retry said on a line, and the file is whole', async () => {
    const { apiKey } = await t.account();
    const { path, data } = await file('cut-part.bin');
    let cuts = 0;
    proxy.cut((req) => isUploadPart(req) && partNumber(req) === 4 && cuts++ < 2);
    try {
      const before = proxy.received.length;
      const run = await runToExit([bin, 'upload', path, '--server', t.server.url, '--key', apiKey, '--part-size', '5MiB'], { env: baseEnv, deadlineMs: 60_000 });
      expect(run.code, run.stderr).to.equal(0);
      expect(run.stderr).to.equal('dropstream: retrying in 1 s: part 4: connection reset\ndropstream: retrying in 2 s: part 4: connection reset\n');
      expect(partsPut(proxy, before)).to.deep.equal([1, 2, 3, 4, 4, 4, 5, 6, 7]);
      expect(sha256(await download(run.stdout.trim(), apiKey))).to.equal(sha256(data));
    } finally {
      proxy.cut(undefined);
    }
  });

  it('when a file request is sent through its link and the server offers direct uploads, then the parts go to the store, the receipt is printed and the owner has the same bytes', async () => {
    const { apiKey } = await t.account();
    const made = await fetch(`${t.server.url}/api/v1/requests`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: 'scans', password: 'friday' }),
    });
    expect(made.status).to.equal(201);
    const link = t.url(((await made.json()) as { request: { upload_link: string } }).request.upload_link);
    const { path, data } = await file('through-request.bin');
    const before = proxy.received.length;
    const run = await runToExit([bin, 'upload', path, '--request', link, '--password', 'friday', '--part-size', '5MiB'], { env: baseEnv, deadlineMs: 60_000 });
    expect(run.code, run.stderr).to.equal(0);
    expect(JSON.parse(run.stdout)).to.deep.equal({ success: true, filename: 'through-request.bin', size: data.length });
    expect(partsPut(proxy, before)).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
    const files = (await (await fetch(`${t.server.url}/api/v1/files`, { headers: { Authorization: `Bearer ${apiKey}` } })).json()) as { files: { public_link: string }[] };
    expect(files.files).to.have.length(1);
    expect(sha256(await download(files.files[0]!.public_link, apiKey))).to.equal(sha256(data));
  });

  it('when an interrupted upload straight to the store is run again with --fresh, then the old one is aborted and every part is sent again', async () => {
    const { apiKey } = await t.account();
    const { path, data } = await file('fresh.bin');
    const command = [bin, 'upload', path, '--server', t.server.url, '--key', apiKey, '--part-size', '5MiB'];
    proxy.hold((req) => isUploadPart(req) && partNumber(req) > 2);
    const child = spawn(process.execPath, command, { env: baseEnv, stdio: 'ignore' });
    const closed = once(child, 'close');
    try {
      const oldUpload = await until('the CLI to remember its upload', () => rememberedUpload(path));
      await until('a part held', async () => (proxy.held >= 1 ? true : undefined));
      child.kill('SIGKILL');
      await closed;
      proxy.hold(undefined);
      proxy.drop();
      const before = proxy.received.length;
      const second = await runToExit([...command, '--fresh'], { env: baseEnv, deadlineMs: 60_000 });
      expect(second.code, second.stderr).to.equal(0);
      expect(second.stderr).to.equal('');
      expect(partsPut(proxy, before)).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
      // Aborted, so its slot and reservation came back.
      expect((await fetch(oldUpload, { headers: { Authorization: `Bearer ${apiKey}` } })).status).to.equal(404);
      expect(sha256(await download(second.stdout.trim(), apiKey))).to.equal(sha256(data));
    } finally {
      child.kill('SIGKILL');
    }
  });

  for (const how of ['SIGINT', 'SIGKILL'] as const) {
    it(`when an upload straight to the store is ${how === 'SIGINT' ? 'interrupted with Ctrl-C' : 'killed'} once parts are stored, then the same command resumes it, sending only the parts the store lacks, and the file is byte-identical`, async () => {
      const { apiKey } = await t.account();
      const { path, data } = await file(`cut-${how}.bin`);
      const command = [bin, 'upload', path, '--server', t.server.url, '--key', apiKey, '--part-size', '5MiB'];
      // Parts 1 and 2 reach the store; the others are held unanswered, so the upload is mid-way.
      proxy.hold((req) => isUploadPart(req) && partNumber(req) > 2);
      const child = spawn(process.execPath, command, { env: baseEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      child.stdout.resume();
      const closed = once(child, 'close');
      try {
        const uploadUrl = await until('the CLI to remember its upload', () => rememberedUpload(path));
        const stored = async () => {
          const res = await fetch(uploadUrl, { headers: { Authorization: `Bearer ${apiKey}` } });
          const body = (await res.json()) as { parts_stored: { part_number: number }[] };
          expect(res.status, JSON.stringify(body)).to.equal(200);
          return body.parts_stored.map((p) => p.part_number);
        };
        // Polled: the store holds parts 1 and 2, and the CLI waits on the held ones.
        await until('two parts in the store', async () => ((await stored()).length === 2 && proxy.held >= 1 ? true : undefined));
        child.kill(how);
        const [code, signal] = (await closed) as [number | null, NodeJS.Signals | null];
        if (how === 'SIGINT') {
          expect(code, stderr).to.equal(130);
          // One clear line: what the store holds, and how to go on.
          expect(stderr).to.match(/^dropstream: interrupted at 33% \(10\.5 MB of 31\.5 MB in the store, 2 of 7 parts\); run the same command again to resume, or add --fresh to start over\n$/);
        } else expect(signal).to.equal('SIGKILL');
        expect(await stored()).to.deep.equal([1, 2]);
        proxy.hold(undefined);
        proxy.drop();

        const before = proxy.received.length;
        const second = await runToExit(command, { env: baseEnv, deadlineMs: 60_000 });
        expect(second.code, second.stderr).to.equal(0);
        // Only the parts the store lacked crossed the wire.
        expect(partsPut(proxy, before)).to.deep.equal([3, 4, 5, 6, 7]);
        expect(second.stderr).to.equal('dropstream: resumed at 33% (10.5 MB of 31.5 MB already in the store)\n');
        expect(sha256(await download(second.stdout.trim(), apiKey))).to.equal(sha256(data));
        expect(await rememberedUpload(path)).to.equal(undefined);
      } finally {
        child.kill('SIGKILL');
      }
    });
  }
});
