// `dropstream upload` and `dropstream download` as a user runs them: the
// compiled CLI (bin/dropstream.js -> dist/, so `npm run build` first) in a
// child process, against a real server.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { filenameFromDisposition } from '../../src/cli/download.js';
import { multipartFraming } from '../../src/cli/transfer.js';
import { createProgress, formatBytes, formatProgress } from '../../src/cli/progress.js';
import { PUBLIC_URL, startTestServer, type TestServer } from '../helpers/server.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { envWithoutConfig, runToExit } from '../helpers/run-to-exit.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = join(root, 'bin', 'dropstream.js');

/** This process's environment without anything dropstream reads. */
/** Where upload remembers unfinished uploads (XDG_CACHE_HOME): this run's own, never the user's ~/.cache. */
const cacheHome = join(tmpdir(), `dropstream-cli-cache-${process.pid}`);
const baseEnv = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_') || name === 'ADMIN_URL' || name === 'XDG_CACHE_HOME'), XDG_CACHE_HOME: cacheHome };
interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function runCli(args: string[], { env = {}, cwd = root, deadlineMs = 30_000 }: { env?: Record<string, string>; cwd?: string; deadlineMs?: number } = {}): Promise<CliResult> {
  const { code, signal, stdout, stderr } = await runToExit([bin, ...args], { cwd, env: { ...baseEnv, ...env }, deadlineMs });
  if (signal === 'SIGKILL') throw new Error(`dropstream ${args.join(' ')} did not exit\nstdout: ${stdout}\nstderr: ${stderr}`);
  return { code, stdout, stderr };
}

/** Checks success without progress: exit 0, nothing on stderr, exactly one line on stdout; returns it. */
function onlyLine(result: CliResult): string {
  expect(result.stderr, 'stderr').to.equal('');
  expect(result.code, 'exit code').to.equal(0);
  expect(result.stdout, 'stdout').to.match(/^[^\n]+\n$/);
  return result.stdout.slice(0, -1);
}

/** Checks success: exit 0, nothing on stderr; returns stdout. */
function onlyLines(result: CliResult): string {
  expect(result.stderr, 'stderr').to.equal('');
  expect(result.code, 'exit code').to.equal(0);
  return result.stdout;
}

/** Checks a failure: exit 1, nothing on stdout, one `dropstream: ...` line on stderr; returns it. */
function failure(result: CliResult): string {
  expect(result.code, 'exit code').to.equal(1);
  expect(result.stdout, 'stdout').to.equal('');
  expect(result.stderr, 'stderr').to.match(/^dropstream: [^\n]+\n$/);
  return result.stderr.trim();
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('dropstream upload and download', () => {
  const NAME = 'résumé 1.bin';
  let t: TestServer;
  let key: string;
  let sourceDir: string;
  let source: string;
  let content: Buffer;
  /** A link (mapped to the real server) to a file holding `content`, uploaded once by the first test. */
  let link: string;
  const work: string[] = [];

  const folder = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dropstream-transfer-'));
    work.push(dir);
    return dir;
  };
  const upload = (path: string, ...flags: string[]) => runCli(['upload', path, '--server', t.server.url, ...flags]);

  before(async () => {
    t = await startTestServer('pglite');
    key = (await t.account()).apiKey;
    sourceDir = await folder();
    source = join(sourceDir, NAME);
    content = randomBytes(3 * 1024 * 1024 + 123);
    await writeFile(source, content);
  });

  after(async () => {
    await t?.close();
    await Promise.all([...work, cacheHome].map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it('when a file is uploaded, then stdout is exactly the public link, and download saves it under its UTF-8 name with identical bytes', async () => {
    const printed = onlyLine(await upload(source, '--key', key));
    expect(printed.startsWith(`${PUBLIC_URL}/download/`), printed).to.equal(true);
    link = t.url(printed);

    const dir = await folder();
    const saved = onlyLine(await runCli(['download', link], { cwd: dir }));
    expect(saved).to.equal(join(dir, NAME));
    expect(await readdir(dir)).to.deep.equal([NAME]);
    expect(sha256(await readFile(join(dir, NAME)))).to.equal(sha256(content));
  });

  it('when --progress is passed, then stderr shows a progress line reaching 100% and stdout still holds only the result', async () => {
    const up = await upload(source, '--key', key, '--progress');
    expect(up.code, up.stderr).to.equal(0);
    expect(up.stdout).to.match(/^http:\/\/files\.test\/download\/\S+\n$/);
    expect(up.stderr).to.match(/100%/).and.match(/MB\/s/).and.match(/\n$/);
    expect(up.stderr).not.to.include(key);

    const dir = await folder();
    const down = await runCli(['download', t.url(up.stdout.trim()), '--progress', '-o', join(dir, 'copy.bin')]);
    expect(down.code, down.stderr).to.equal(0);
    expect(down.stdout).to.equal(`${join(dir, 'copy.bin')}\n`);
    expect(down.stderr).to.match(/3\.1 MB \/ 3\.1 MB {2}100%/);
  });

  it('when a resumable upload loses its connection twice, then the CLI resumes by itself, shows the resumed offset and prints the link', async function () {
    // Each cut is followed by 409s (1 s apart) until the server has finished the cut request: slow on a loaded machine.
    this.timeout(100_000);
    const dir = await folder();
    const big = join(dir, 'big.bin');
    const data = randomBytes(24 * 1024 * 1024);
    await writeFile(big, data);
    const proxy = await startCuttingProxy(t.server.url, [7 * 1024 * 1024, 15 * 1024 * 1024]);
    try {
      const up = await runCli(['upload', big, '--server', proxy.url, '--key', key, '--resumable', '--progress'], { deadlineMs: 90_000 });
      expect(up.code, up.stderr).to.equal(0);
      expect(proxy.cuts()).to.equal(2);
      expect(up.stdout).to.match(/^http:\/\/files\.test\/download\/\S+\n$/);
      expect(up.stderr).to.match(/\(resumed at \d+\.\d MB\)/).and.match(/100%/);
      // Each retry is announced on a line of its own (the progress line is drawn with \r, so split on both).
      // (A retry may also meet 409 while the server still finishes the cut request.)
      const retries = up.stderr.split(/[\r\n]/).map((line) => line.trim()).filter((line) => /^dropstream: retrying (now|in \d+ s): /.test(line));
      // A cut can also land on a request the server had already refused with 409, so at least one.
      expect(retries.filter((line) => /: connection (reset|broken)$/.test(line)), up.stderr).to.have.length.within(1, 2);
      for (const line of retries) expect(line).to.match(/: (connection (reset|broken)|server answered 409 \(the upload is still busy with the cut request\))$/);
      // The line never restarts from a lower count: each drawn count is at least the one before.
      const counts = up.stderr.split(/[\r\n]/).map((line) => /^(\d+(?:\.\d)?) (B|kB|MB)/.exec(line.trim())).filter((m) => m !== null);
      const bytes = counts.map((m) => Number(m[1]) * { B: 1, kB: 1e3, MB: 1e6 }[m[2] as 'B' | 'kB' | 'MB']);
      for (let i = 1; i < bytes.length; i++) expect(bytes[i], `count ${i} of ${bytes.join(', ')}`).to.be.at.least(bytes[i - 1]!);
      expect(up.stderr).not.to.include(key);
      const res = await fetch(t.url(up.stdout.trim()));
      expect(sha256(Buffer.from(await res.arrayBuffer()))).to.equal(sha256(data));
    } finally {
      await proxy.close();
    }
  });

  it('when a resumable upload loses its connection silently (the server hears nothing more), then the CLI resumes, the server gives way to it, and the file arrives intact having sent at most 1.05x its size', async function () {
    this.timeout(100_000);
    const dir = await folder();
    const big = join(dir, 'silent.bin');
    const data = randomBytes(24 * 1024 * 1024);
    await writeFile(big, data);
    // The CLI's side of the connection goes; the server's stays open and silent, its PATCH holding the upload.
    const proxy = await startCuttingProxy(t.server.url, [9 * 1024 * 1024], { silent: true });
    try {
      const started = Date.now();
      const up = await runCli(['upload', big, '--server', proxy.url, '--key', key, '--resumable', '--progress'], { deadlineMs: 90_000 });
      expect(up.code, up.stderr).to.equal(0);
      expect(proxy.cuts()).to.equal(1);
      expect(up.stdout).to.match(/^http:\/\/files\.test\/download\/\S+\n$/);
      expect(up.stderr).to.match(/\(resumed at \d+\.\d MB\)/).and.match(/100%/);
      // The old PATCH gave way to the CLI's HEAD at once: no wait for its lease to run out (30 s).
      expect(Date.now() - started).to.be.below(25_000);
      expect(proxy.relayed() / data.length).to.be.at.most(1.05);
      const res = await fetch(t.url(up.stdout.trim()));
      expect(sha256(Buffer.from(await res.arrayBuffer()))).to.equal(sha256(data));
    } finally {
      await proxy.close();
    }
  });

  it("when a resumable upload is refused (over the plan's limit), then one error line names the code", async () => {
    await t.plan('tiny-tus', { api_access: true, requests_per_minute: 100, requests_per_day: 100, max_file_size: 10, daily_uploads: 10 });
    const { apiKey } = await t.account('tiny-tus');
    const line = failure(await upload(source, '--key', apiKey, '--resumable'));
    expect(line).to.match(/^dropstream: 403 file_too_large: /);
  });

  it('when no --progress is passed and stderr is not a terminal, then nothing is drawn', async () => {
    // onlyLine checks stderr is empty.
    onlyLine(await upload(source, '--key', key));
  });

  it('when the target file exists, then download refuses and leaves it alone, and --force replaces it', async () => {
    const dir = await folder();
    await writeFile(join(dir, NAME), 'precious');
    expect(failure(await runCli(['download', link], { cwd: dir }))).to.include('--force');
    expect(await readFile(join(dir, NAME), 'utf8')).to.equal('precious');
    expect(await readdir(dir), 'no temp file left').to.deep.equal([NAME]);

    const named = join(dir, 'other.bin');
    await writeFile(named, 'also precious');
    expect(failure(await runCli(['download', link, '-o', named]))).to.include('--force');
    expect(await readFile(named, 'utf8')).to.equal('also precious');

    expect(onlyLine(await runCli(['download', link, '--force'], { cwd: dir }))).to.equal(join(dir, NAME));
    expect(sha256(await readFile(join(dir, NAME)))).to.equal(sha256(content));
    expect((await readdir(dir)).sort()).to.deep.equal([NAME, 'other.bin'].sort());
  });

  it('when -o names a folder, then the file is saved there under the server name', async () => {
    const dir = await folder();
    expect(onlyLine(await runCli(['download', link, '-o', dir]))).to.equal(join(dir, NAME));
    expect(sha256(await readFile(join(dir, NAME)))).to.equal(sha256(content));
  });

  it('when the API key is wrong, then upload exits 1 with one line naming 401, without the key', async () => {
    const bad = 'ds_live_not-a-real-key-at-all';
    const line = failure(await upload(source, '--key', bad));
    expect(line).to.match(/^dropstream: 401 invalid_api_key: /);
    expect(line).not.to.include(bad);
  });

  it('when the file is over the plan limit, then upload exits 1 with one line saying so', async () => {
    // The server answers 403 and hangs up mid-body; the CLI reports the answer, or asks /stats when the hang-up ate it.
    await t.plan('tiny-files', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 1024 * 1024, daily_uploads: 100 });
    const small = (await t.account('tiny-files')).apiKey;
    expect(failure(await upload(source, '--key', small))).to.match(/403 file_too_large|over the plan's max_file_size \(1048576 bytes\)/);
  });

  it('when there is no key at all, then upload says how to give one', async () => {
    expect(failure(await upload(source))).to.include('DROPSTREAM_API_KEY');
  });

  it('when the path does not exist, then upload exits 1 naming it', async () => {
    const missing = join(sourceDir, 'nope.bin');
    expect(failure(await upload(missing, '--key', key))).to.include(missing).and.include('ENOENT');
  });

  it('when the path is a folder, then upload refuses it', async () => {
    expect(failure(await upload(sourceDir, '--key', key))).to.include('not a regular file');
  });

  it('when DROPSTREAM_API_KEY and DROPSTREAM_SERVER are set, then upload needs no flags', async () => {
    const small = join(sourceDir, 'small.txt');
    await writeFile(small, 'hello, env');
    const printed = onlyLine(await runCli(['upload', small], { env: { DROPSTREAM_API_KEY: key, DROPSTREAM_SERVER: t.server.url } }));
    expect(printed.startsWith(`${PUBLIC_URL}/download/`)).to.equal(true);
    const res = await fetch(t.url(printed));
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal('hello, env');
  });

  // Like the admin commands follow ADMIN_PORT: a CLI next to the server reads the server's own settings.
  it('when only the server\'s PORT is set, then upload finds the server at http://localhost:$PORT', async () => {
    const small = join(sourceDir, 'port.txt');
    await writeFile(small, 'hello, port');
    const port = new URL(t.server.url).port;
    const printed = onlyLine(await runCli(['upload', small], { env: { DROPSTREAM_API_KEY: key, PORT: port } }));
    expect(await (await fetch(t.url(printed))).text()).to.equal('hello, port');
  });

  it('when PUBLIC_URL is set, then upload sends to it, and DROPSTREAM_SERVER still wins over it', async () => {
    const small = join(sourceDir, 'public.txt');
    await writeFile(small, 'hello, public url');
    const printed = onlyLine(await runCli(['upload', small], { env: { DROPSTREAM_API_KEY: key, PUBLIC_URL: t.server.url, PORT: '1' } }));
    expect(await (await fetch(t.url(printed))).text()).to.equal('hello, public url');
    const line = failure(
      await runCli(['upload', small], { env: { DROPSTREAM_API_KEY: key, PUBLIC_URL: t.server.url, DROPSTREAM_SERVER: 'http://127.0.0.1:1' } }),
    );
    expect(line).to.include('127.0.0.1:1');
  });

  it('when `dropstream help` is read, then it names the variables upload reads', async () => {
    const help = onlyLines(await runCli(['help']));
    expect(help).to.include('DROPSTREAM_SERVER').and.include('DROPSTREAM_API_KEY').and.include('PUBLIC_URL');
  });

  it('when the link is unknown, then download exits 1 with the 404 and leaves no file behind', async () => {
    const dir = await folder();
    const line = failure(await runCli(['download', t.url('/download/AAAAAAAAAAAAAAAAAAAAAA')], { cwd: dir }));
    expect(line).to.match(/^dropstream: 404 file_not_found: /);
    expect(await readdir(dir)).to.deep.equal([]);
  });

  it('when the connection drops mid-download, then download exits 1 and leaves neither the file nor a temp file', async () => {
    // A server that promises 1 MB, sends 64 kB and hangs up.
    const dropper = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Length': 1_000_000, 'Content-Disposition': 'attachment; filename="cut.bin"' });
      res.write(Buffer.alloc(64 * 1024), () => setTimeout(() => res.destroy(), 50));
    });
    await new Promise<void>((resolve) => dropper.listen(0, '127.0.0.1', resolve));
    try {
      const dir = await folder();
      const { port } = dropper.address() as AddressInfo;
      failure(await runCli(['download', `http://127.0.0.1:${port}/download/x`], { cwd: dir }));
      expect(await readdir(dir)).to.deep.equal([]);
    } finally {
      dropper.closeAllConnections();
      await new Promise((resolve) => dropper.close(resolve));
    }
  });

  it('when the server is unreachable for a resumable upload, then it fails at once with one line instead of retrying for minutes', async () => {
    const started = Date.now();
    const result = await runCli(['upload', source, '--server', 'http://127.0.0.1:1', '--key', key, '--resumable', '--progress']);
    expect(result.code).to.equal(1);
    expect(result.stderr).to.include('ECONNREFUSED').and.not.include('retrying');
    expect(result.stderr.trim().split('\n').at(-1)).to.match(/^dropstream: .*ECONNREFUSED/);
    // tus-js-client's back-off alone would be 4 min 10 s; runCli's deadline is 30 s.
    expect(Date.now() - started).to.be.below(15_000);
  });

  it('when the server is unreachable, then both commands fail with one line', async () => {
    const dir = await folder();
    expect(failure(await runCli(['upload', source, '--server', 'http://127.0.0.1:1', '--key', key]))).to.include('ECONNREFUSED');
    expect(failure(await runCli(['download', 'http://127.0.0.1:1/download/AAAAAAAAAAAAAAAAAAAAAA'], { cwd: dir }))).to.include('ECONNREFUSED');
    expect(await readdir(dir)).to.deep.equal([]);
  });
});

describe('dropstream transfer helpers', () => {
  describe('progress while a resumable upload waits', () => {
    const lines = () => {
      let written = '';
      const out = new Writable({ write: (chunk, _enc, done) => ((written += String(chunk)), done()) });
      return { out, last: () => written.split(/[\r\n]/).filter((l) => l.trim()).at(-1)!.trim(), all: () => written };
    };

    it('when it waits to retry, then the line keeps what was sent and says it waits, whatever counts arrive meanwhile', () => {
      const screen = lines();
      const progress = createProgress({ enabled: true, total: 1_000_000, out: screen.out, intervalMs: 60_000 });
      progress.update(340_000);
      progress.waiting('retry in 5 s');
      progress.update(65_500);
      progress.note('dropstream: retrying in 5 s: connection reset');
      expect(screen.all()).to.include('\rdropstream: retrying in 5 s: connection reset');
      expect(screen.last()).to.equal('340.0 kB sent / 1.0 MB  34%  waiting to resume (retry in 5 s)');
      progress.finish();
    });

    it('when it resumes below what was shown, then the line says what is stored and moves on only once the count passes it', () => {
      const screen = lines();
      const progress = createProgress({ enabled: true, total: 1_000_000, out: screen.out, intervalMs: 60_000, now: () => 0 });
      progress.update(340_000);
      progress.waiting('retry in 5 s');
      progress.resumed(300_000);
      progress.update(301_000);
      progress.note('x');
      expect(screen.last()).to.equal('340.0 kB sent / 1.0 MB  34%  waiting to resume (resuming from 300.0 kB stored)');
      progress.update(350_000);
      progress.finish();
      expect(screen.last()).to.match(/^350\.0 kB \/ 1\.0 MB {2}35% .*\(resumed at 300\.0 kB\)$/);
    });
  });

  describe('formatProgress', () => {
    it('when the total is known, then the line has bytes of total, percentage, rate and ETA', () => {
      const line = formatProgress({ done: 1_500_000, total: 3_000_000, elapsedMs: 1000 });
      expect(line).to.equal('1.5 MB / 3.0 MB  50%  1.5 MB/s  ETA 0:01');
    });

    it('when the total is unknown, then the line has bytes and rate but no percentage or ETA', () => {
      const line = formatProgress({ done: 2_500_000, elapsedMs: 2000 });
      expect(line).to.equal('2.5 MB  1.3 MB/s');
      expect(line).not.to.include('%');
      expect(line).not.to.include('ETA');
    });

    it('when no time has passed yet, then rate and ETA are placeholders, not NaN or Infinity', () => {
      const line = formatProgress({ done: 0, total: 10, elapsedMs: 0 });
      expect(line).to.equal('0 B / 10 B  0%  -- MB/s  ETA --:--');
    });

    it('when the transfer is done, then it reads 100% and ETA 0:00', () => {
      expect(formatProgress({ done: 10, total: 10, elapsedMs: 0 })).to.include('100%').and.include('ETA 0:00');
      expect(formatProgress({ done: 0, total: 0, elapsedMs: 5 })).to.include('100%');
    });

    it('when one byte is missing, then it does not claim 100%', () => {
      expect(formatProgress({ done: 999, total: 1000, elapsedMs: 1000 })).to.include(' 99%');
    });

    it('when the ETA is over an hour, then it shows hours', () => {
      expect(formatProgress({ done: 1_000_000, total: 4_000_000_000, elapsedMs: 1000 })).to.include('ETA 1:06:39');
    });

    it('when sizes cross a unit boundary, then they move up a unit', () => {
      expect(formatBytes(999)).to.equal('999 B');
      expect(formatBytes(999_960)).to.equal('1.0 MB');
      expect(formatBytes(5_368_709_120)).to.equal('5.4 GB');
    });
  });

  describe('filenameFromDisposition', () => {
    it('when filename* is present, then it wins over the ASCII fallback', () => {
      expect(filenameFromDisposition(`attachment; filename="r?sum? 1.bin"; filename*=UTF-8''r%C3%A9sum%C3%A9%201.bin`)).to.equal('résumé 1.bin');
      expect(filenameFromDisposition(`attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.bin; filename="fallback.bin"`)).to.equal('résumé.bin');
    });

    it('when only filename is present, then it is used', () => {
      expect(filenameFromDisposition('attachment; filename="plain.txt"')).to.equal('plain.txt');
    });

    it('when the name has path segments or control characters, then only a clean basename is kept', () => {
      expect(filenameFromDisposition(`attachment; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd`)).to.equal('passwd');
      expect(filenameFromDisposition('attachment; filename="..\\\\evil.exe"')).to.equal('evil.exe');
      expect(filenameFromDisposition(`attachment; filename*=UTF-8''a%0Ab.txt`)).to.equal('ab.txt');
    });

    it('when there is no usable name, then there is none', () => {
      expect(filenameFromDisposition(undefined)).to.equal(undefined);
      expect(filenameFromDisposition('attachment')).to.equal(undefined);
      expect(filenameFromDisposition('attachment; filename=".."')).to.equal(undefined);
    });
  });

  describe('multipartFraming', () => {
    it('when the name has quotes and backslashes, then they are escaped in the part header', () => {
      const { head, tail, contentType } = multipartFraming('a"b\\c.txt');
      const boundary = /boundary=(\S+)$/.exec(contentType)![1]!;
      expect(head.toString()).to.equal(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a\\"b\\\\c.txt"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      );
      expect(tail.toString()).to.equal(`\r\n--${boundary}--\r\n`);
    });

    it('when the name has a line break, then it is refused rather than breaking the framing', () => {
      expect(() => multipartFraming('a\r\nb.txt')).to.throw(/control characters/);
    });

    it('when framed twice, then the boundaries differ', () => {
      expect(multipartFraming('x').contentType).not.to.equal(multipartFraming('x').contentType);
    });
  });
});
