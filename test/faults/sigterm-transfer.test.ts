// SIGTERM with transfers in flight, outside Docker: `dropstream serve` as a
// process of its own (the compiled CLI: `npm run build` first). The upload
// and the download in flight finish within the grace period, a new
// connection is refused meanwhile, and the process then exits 0 having
// stored the upload (test/docker/ checks the same inside the image).
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { uploadFile } from '../helpers/client.js';
import { BOUNDARY } from '../helpers/multipart.js';
import { eventually, startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { startTestS3 } from '../helpers/test-s3.js';

const MiB = 1024 * 1024;

/** A download read slowly: the first bytes at once, the rest when `finish()` is called. */
function slowDownload(url: string): { started: Promise<void>; finish(): void; received: Promise<{ status: number; bytes: number }> } {
  let resume = () => {};
  let start = () => {};
  const started = new Promise<void>((resolve) => (start = resolve));
  const received = new Promise<{ status: number; bytes: number }>((resolve, reject) => {
    request(url, (res) => {
      let bytes = 0;
      res.once('data', (chunk: Buffer) => {
        bytes += chunk.length;
        res.pause();
        resume = () => res.resume();
        start();
        res.on('data', (more: Buffer) => (bytes += more.length));
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
  return { started, finish: () => resume(), received };
}

describe('SIGTERM with transfers in flight (dropstream serve, no Docker)', function () {
  this.timeout(60_000);
  let dataDir: string;
  let server: ServerProcess | undefined;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-sigterm-'));
  });
  after(async () => {
    await server?.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when SIGTERM comes during an upload and a download, then both finish, new connections are refused, and the process exits 0 with the upload stored', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, SHUTDOWN_TIMEOUT: '20', UPLOAD_MIN_RATE: '0' });
    const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
    const stored = await uploadFile(server.url, key, 'big.bin', Buffer.alloc(8 * MiB, 1));
    expect(stored.status).to.equal(201);
    const download = slowDownload(server.url + new URL(stored.body.public_link).pathname);
    await download.started;

    const upload = startRawUpload(server.url, key, 'in-flight.bin');
    await writeBytes(upload.req, MiB);
    const tmp = join(dataDir, 'objects', '.tmp');
    expect(await eventually(async () => (await readdir(tmp).catch(() => [])).length, (n) => n > 0)).to.be.greaterThan(0);

    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      server!.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    server.child.kill('SIGTERM');
    const knock = () => fetch(`${server!.url}/healthz`).then(() => 'answered', (err: { cause?: { code?: string } }) => err.cause?.code ?? 'failed');
    expect(await eventually(knock, (answer) => answer === 'ECONNREFUSED')).to.equal('ECONNREFUSED');

    // Both transfers are still served after the signal.
    await writeBytes(upload.req, MiB);
    upload.req.end(`\r\n--${BOUNDARY}--\r\n`);
    download.finish();
    const uploaded = await upload.outcome;
    expect(uploaded.status, uploaded.body ?? uploaded.error).to.equal(201);
    expect(JSON.parse(uploaded.body!).size).to.equal(2 * MiB);
    expect(await download.received).to.deep.equal({ status: 200, bytes: 8 * MiB });

    expect(await exited).to.deep.equal({ code: 0, signal: null });
    expect(server.stdoutLines.some((line) => line.includes('"msg":"shutting down"') && line.includes('SIGTERM'))).to.equal(true);

    // The upload that finished during shutdown is there after a restart.
    server = await startServerProcess({ DATA_DIR: dataDir });
    const file = await fetch(server.url + new URL(JSON.parse(uploaded.body!).public_link).pathname);
    expect(file.status).to.equal(200);
    expect((await file.arrayBuffer()).byteLength).to.equal(2 * MiB);
  });

  it('when SIGTERM comes during an S3 download read into reused buffers (S3_POOLED_READS), then it finishes with every byte and the process exits 0', async () => {
    await server?.kill('SIGKILL');
    server = undefined;
    const s3 = await startTestS3();
    const s3DataDir = await mkdtemp(join(tmpdir(), 'dropstream-sigterm-s3-'));
    try {
      server = await startServerProcess({ DATA_DIR: s3DataDir, SHUTDOWN_TIMEOUT: '20', ...s3.env(s3.bucket('sigterm')) });
      const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
      const stored = await uploadFile(server.url, key, 'big.bin', Buffer.alloc(8 * MiB, 1));
      expect(stored.status).to.equal(201);
      const download = slowDownload(server.url + new URL(stored.body.public_link).pathname);
      await download.started;
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        server!.child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      server.child.kill('SIGTERM');
      const knock = () => fetch(`${server!.url}/healthz`).then(() => 'answered', (err: { cause?: { code?: string } }) => err.cause?.code ?? 'failed');
      expect(await eventually(knock, (answer) => answer === 'ECONNREFUSED')).to.equal('ECONNREFUSED');
      download.finish();
      expect(await download.received).to.deep.equal({ status: 200, bytes: 8 * MiB });
      expect(await exited).to.deep.equal({ code: 0, signal: null });
      server = undefined;
    } finally {
      await server?.kill('SIGKILL');
      server = undefined;
      await s3.close();
      await rm(s3DataDir, { recursive: true, force: true });
    }
  });
});
