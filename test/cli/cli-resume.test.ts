// `dropstream upload` and `dropstream download` interrupted with Ctrl-C
// (issue 37, item 3): exit 130 at once, the request aborted; a resumable
// upload remembered (upload-store.ts) and continued by the same command run
// again, or started over with --fresh. The compiled CLI (bin/dropstream.js ->
// dist/, so `npm run build` first) in a child process, against a real server
// and a real SIGINT.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { envWithoutConfig, repoRoot, runToExit } from '../helpers/run-to-exit.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const bin = join(repoRoot, 'bin', 'dropstream.js');

/** Where upload remembers unfinished uploads (XDG_CACHE_HOME): this run's own, never the user's ~/.cache. */
const cacheHome = join(tmpdir(), `dropstream-resume-cache-${process.pid}`);
const baseEnv = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_') || name === 'ADMIN_URL' || name === 'XDG_CACHE_HOME'), XDG_CACHE_HOME: cacheHome };

async function runCli(args: string[], { deadlineMs = 30_000 }: { deadlineMs?: number } = {}) {
  const { code, signal, stdout, stderr } = await runToExit([bin, ...args], { env: baseEnv, deadlineMs });
  if (signal === 'SIGKILL') throw new Error(`dropstream ${args.join(' ')} did not exit\nstdout: ${stdout}\nstderr: ${stderr}`);
  return { code, stdout, stderr };
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** The unfinished uploads upload remembers for `path` (the store's keys name the file). */
const storedUploads = async (path: string): Promise<Record<string, unknown>> => {
  const all: Record<string, unknown> = JSON.parse(await readFile(join(cacheHome, 'dropstream', 'uploads.json'), 'utf8').catch(() => '{}'));
  return Object.fromEntries(Object.entries(all).filter(([key]) => key.includes(` ${path} `)));
};

/** Runs `dropstream ...args`, sends it SIGINT once `when` resolves; resolves with its exit and output, and how long it took to exit after the signal. */
async function interruptCli(args: string[], when: Promise<void>): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; exitMs: number }> {
  const child = spawn(process.execPath, [bin, ...args], { env: baseEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const closed = once(child, 'close');
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  // A child that exits first (a refused flag, say) is reported as it is, not waited on.
  const exitedFirst = await Promise.race([when.then(() => false), closed.then(() => true)]);
  const sentAt = Date.now();
  if (!exitedFirst) child.kill('SIGINT');
  const [code, signal] = (await closed) as [number | null, NodeJS.Signals | null];
  clearTimeout(killer);
  return { code, signal, stdout, stderr, exitMs: Date.now() - sentAt };
}

describe('dropstream upload and download interrupted', () => {
  let t: TestServer;
  const work: string[] = [];

  const folder = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dropstream-resume-'));
    work.push(dir);
    return dir;
  };

  before(async () => {
    t = await startTestServer('pglite');
  });

  after(async () => {
    await t?.close();
    await Promise.all([...work, cacheHome].map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it('when a resumable upload is interrupted with Ctrl-C, then it exits 130 at once saying where it stopped, and the same command run again resumes there and finishes', async function () {
    this.timeout(100_000);
    // One upload a day: had the second run started a new upload, the server would refuse it.
    await t.plan('one-tus', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 1024 * 1024 * 1024, daily_uploads: 1 });
    const { apiKey } = await t.account('one-tus');
    const dir = await folder();
    const big = join(dir, 'big.bin');
    const data = randomBytes(24 * 1024 * 1024);
    await writeFile(big, data);
    // A proxy that passes 6 MiB and then holds the rest: the upload is mid-way when Ctrl-C comes (later connections pass).
    const proxy = await startCuttingProxy(t.server.url, [], { stallAfter: 6 * 1024 * 1024 });
    const command = ['upload', big, '--server', proxy.url, '--key', apiKey, '--resumable', '--password', 'not-in-the-cache'];
    try {
      const first = await interruptCli(command, proxy.stalled());
      expect(first.code, first.stderr).to.equal(130);
      expect(first.stdout).to.equal('');
      // The request was aborted, not left to time out: the process was gone at once.
      expect(first.exitMs).to.be.below(5_000);
      const lines = first.stderr.trim().split('\n');
      // How far it got as tus-js-client last reported it (its progress is throttled to 10 a second, so it may lag).
      expect(lines.at(-1)).to.match(/^dropstream: interrupted at \d+% \(\d+(\.\d)? (B|kB|MB) of 25\.2 MB\); run the same command again to resume, or add --fresh to start over$/);
      for (const line of lines.slice(0, -1)) expect(line).to.match(/^dropstream: retrying (now|in \d+ s): /);
      // Remembered for the next run: its URL, not its password, nor the key.
      const stored = JSON.stringify(await storedUploads(big));
      expect(Object.keys(await storedUploads(big))).to.have.length(1);
      expect(stored).to.include('/api/v1/uploads/').and.not.include('not-in-the-cache').and.not.include(apiKey);

      const relayedBefore = proxy.relayed();
      const second = await runCli(command, { deadlineMs: 90_000 });
      expect(second.code, second.stderr).to.equal(0);
      const resumed = /^dropstream: resumed at (\d+)% \((\d+(?:\.\d)?) MB of 25\.2 MB already on the server\)$/m.exec(second.stderr);
      expect(resumed, second.stderr).not.to.equal(null);
      expect(Number(resumed![1])).to.be.within(1, 99);
      // Only the rest crossed the wire (plus the HEAD and headers).
      const stored_mb = Number(resumed![2]);
      expect(proxy.relayed() - relayedBefore).to.be.below(data.length - stored_mb * 1e6 + 64 * 1024);
      const res = await fetch(t.url(second.stdout.trim()), { headers: { Authorization: `Basic ${Buffer.from(':not-in-the-cache').toString('base64')}` } });
      expect(res.status).to.equal(200);
      expect(sha256(Buffer.from(await res.arrayBuffer()))).to.equal(sha256(data));
      // Finished: forgotten.
      expect(await storedUploads(big)).to.deep.equal({});
    } finally {
      await proxy.close();
    }
  });

  it('when an interrupted upload is run again with --fresh, then it starts over from 0, and the old upload is terminated (its daily slot comes back)', async function () {
    this.timeout(100_000);
    await t.plan('one-tus-fresh', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 1024 * 1024 * 1024, daily_uploads: 1 });
    const { apiKey } = await t.account('one-tus-fresh');
    const dir = await folder();
    const big = join(dir, 'again.bin');
    const data = randomBytes(24 * 1024 * 1024);
    await writeFile(big, data);
    const proxy = await startCuttingProxy(t.server.url, [], { stallAfter: 6 * 1024 * 1024 });
    const command = ['upload', big, '--server', proxy.url, '--key', apiKey, '--resumable'];
    try {
      expect((await interruptCli(command, proxy.stalled())).code).to.equal(130);
      const relayedBefore = proxy.relayed();
      const second = await runCli([...command, '--fresh'], { deadlineMs: 90_000 });
      expect(second.code, second.stderr).to.equal(0);
      expect(second.stderr).not.to.include('resumed at');
      // All of it again: a new upload (which one a day allows only because the old one was terminated).
      expect(proxy.relayed() - relayedBefore).to.be.at.least(data.length);
      const res = await fetch(t.url(second.stdout.trim()));
      expect(sha256(Buffer.from(await res.arrayBuffer()))).to.equal(sha256(data));
      expect(await storedUploads(big)).to.deep.equal({});
    } finally {
      await proxy.close();
    }
  });

  it('when a plain upload is interrupted with Ctrl-C, then it exits 130 at once and the server keeps nothing', async () => {
    const { apiKey } = await t.account();
    const dir = await folder();
    const file = join(dir, 'plain.bin');
    await writeFile(file, randomBytes(16 * 1024 * 1024));
    const proxy = await startCuttingProxy(t.server.url, [], { stallAfter: 4 * 1024 * 1024 });
    try {
      const result = await interruptCli(['upload', file, '--server', proxy.url, '--key', apiKey, '--plain'], proxy.stalled());
      expect(result.code, result.stderr).to.equal(130);
      expect(result.exitMs).to.be.below(5_000);
      expect(result.stderr).to.equal('dropstream: interrupted; a plain upload starts over when run again (files from 64 MiB, or with --resumable, resume)\n');
      const list = await fetch(`${t.server.url}/api/v1/files`, { headers: { Authorization: `Bearer ${apiKey}` } });
      expect(((await list.json()) as { files: unknown[] }).files).to.deep.equal([]);
    } finally {
      await proxy.close();
    }
  });

  it('when a download is interrupted with Ctrl-C, then it exits 130 at once and leaves neither the file nor a temp file', async () => {
    // A server that promises 1 MB, sends 64 kB and then nothing.
    let sent!: () => void;
    const started = new Promise<void>((resolve) => (sent = resolve));
    const staller = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Length': 1_000_000, 'Content-Disposition': 'attachment; filename="held.bin"' });
      res.write(Buffer.alloc(64 * 1024), () => sent());
    });
    await new Promise<void>((resolve) => staller.listen(0, '127.0.0.1', resolve));
    try {
      const dir = await folder();
      const { port } = staller.address() as AddressInfo;
      // The child runs in `dir` (interruptCli starts it in this process's folder, so -o names the folder).
      const result = await interruptCli(['download', `http://127.0.0.1:${port}/download/x`, '-o', dir], started.then(() => new Promise((resolve) => setTimeout(resolve, 300))));
      expect(result.code, result.stderr).to.equal(130);
      expect(result.exitMs).to.be.below(5_000);
      expect(result.stderr).to.equal('dropstream: interrupted\n');
      expect(await readdir(dir)).to.deep.equal([]);
    } finally {
      staller.closeAllConnections();
      await new Promise((resolve) => staller.close(resolve));
    }
  });
});
