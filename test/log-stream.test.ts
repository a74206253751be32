// The log stream is JSON, one object per line, and nothing else: log
// collectors parse stdout line by line and a container's stderr lands in the
// same stream. The server runs as operators run it (`dropstream serve`, the
// compiled build, in a child process on the Node that runs the tests: 24 in
// CI), with S3 and Redis, through a day's worth of traffic including the
// failures that make libraries talk (hang-ups, refusals, a dependency down),
// and its shutdown.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { call, uploadFile } from './helpers/client.js';
import { BOUNDARY, multipartType } from './helpers/multipart.js';
import { freshPrefix, redisUrl } from './helpers/redis.js';
import { startS3rver, type TestS3 } from './helpers/s3rver.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const MiB = 1024 * 1024;

/** Sends part of an upload, then hangs up. */
async function hangUpMidUpload(url: string, key: string): Promise<void> {
  const req = request(`${url}/api/v1/files/upload`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType() },
  });
  req.on('error', () => {});
  req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n`);
  await new Promise<void>((resolve) => req.write(randomBytes(MiB), () => resolve()));
  await sleep(200);
  req.destroy();
}

/** Starts a download and hangs up after the first bytes. */
async function hangUpMidDownload(link: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const req = request(link, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => resolve());
    req.end();
  });
}

async function traffic(server: ServerProcess): Promise<void> {
  const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
  const small = await uploadFile(server.url, key, 'résumé.txt', 'hello');
  expect(small.status).to.equal(201);
  const big = await uploadFile(server.url, key, 'big.bin', randomBytes(20 * MiB));
  expect(big.status).to.equal(201);
  const link = (l: string) => l.replace(/^https?:\/\/[^/]+/, server.url);
  expect((await call(link(big.body.public_link))).status).to.equal(200);
  expect((await call(link(big.body.public_link), { headers: { Range: 'bytes=0-99' } })).status).to.equal(206);
  expect((await call(link(big.body.public_link), { method: 'HEAD' })).status).to.equal(200);
  await hangUpMidDownload(link(big.body.public_link));
  await hangUpMidUpload(server.url, key);
  expect((await call(`${server.url}/api/v1/files`, { key })).status).to.equal(200);
  expect((await call(`${server.url}/api/v1/files/${small.body.file_id}`, { key })).status).to.equal(200);
  expect((await call(`${server.url}/api/v1/stats`, { key })).status).to.equal(200);
  expect((await call(`${server.url}/api/v1/files/${small.body.file_id}`, { key, method: 'DELETE' })).status).to.equal(200);
  // Refusals and errors.
  expect((await call(`${server.url}/api/v1/files`)).status).to.equal(401);
  expect((await call(`${server.url}/api/v1/files`, { key: 'ds_live_nonsense' })).status).to.equal(401);
  expect((await call(`${server.url}/download/nope`)).status).to.equal(404);
  expect((await call(link(big.body.public_link), { headers: { Range: 'bytes=999999999-' } })).status).to.equal(416);
  expect((await call(`${server.url}/api/v1/files`, { key, method: 'PUT' })).status).to.equal(405);
  expect((await call(`${server.url}/api/v1/files/upload`, { key, method: 'POST', body: 'not multipart' })).status).to.equal(400);
  // Operations.
  expect((await call(`${server.url}/readyz`)).status).to.equal(200);
  expect((await call(`${server.url}/docs/`)).status).to.equal(200);
  expect((await call(`${server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${server.adminToken}` } })).status).to.equal(200);
  await server.admin('POST', '/admin/gc', { grace_seconds: 0 });
}

/** Every stdout line is one JSON object, stderr is empty, and the lines that tell the story are there. */
function expectOnlyJson(server: ServerProcess, expected: RegExp[]): void {
  const notJson = server.stdoutLines.filter((line) => {
    try {
      const value: unknown = JSON.parse(line);
      return typeof value !== 'object' || value === null || Array.isArray(value);
    } catch {
      return true;
    }
  });
  expect(notJson, 'stdout lines that are not one JSON object').to.deep.equal([]);
  expect(server.stderr(), 'stderr').to.equal('');
  for (const pattern of expected) expect(server.stdoutLines.some((line) => pattern.test(line)), `a line matching ${pattern}`).to.equal(true);
}

describe('the log stream: JSON lines only, from start to shutdown', function () {
  this.timeout(120_000);
  let dataDir: string;
  let s3: TestS3;
  let server: ServerProcess | undefined;

  before(async () => {
    s3 = await startS3rver();
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-logs-'));
  });
  afterEach(async () => {
    await server?.kill();
    server = undefined;
    await rm(dataDir, { recursive: true, force: true });
  });
  after(() => s3?.close());

  it(`when the server runs with S3${redisUrl ? ' and Redis' : ''} through uploads, downloads, hang-ups, refusals and a SIGTERM, then every line it prints is a JSON object`, async () => {
    server = await startServerProcess({
      DATA_DIR: dataDir,
      ...s3.env(`logs-${randomBytes(4).toString('hex')}`),
      ...(redisUrl ? { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: freshPrefix() } : {}),
    });
    await traffic(server);
    await server.kill('SIGTERM');
    expect(server.child.exitCode).to.equal(0);
    expectOnlyJson(server, [/"msg":"dropstream listening"/, /"status":206/, /"status":499/, /"status":416/, /"msg":"stopped"/]);
  });

  it('when Redis and then the object store are unreachable, then the outage is logged as JSON too', async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, ...s3.env(`logs-${randomBytes(4).toString('hex')}`), REDIS_URL: 'redis://127.0.0.1:1' });
    const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'pro' });
    expect((await uploadFile(server.url, key, 'a.txt', 'x')).status).to.equal(201);
    await s3.stop();
    try {
      expect((await uploadFile(server.url, key, 'b.txt', 'y')).status).to.equal(503);
      expect((await call(`${server.url}/readyz`)).status).to.equal(503);
    } finally {
      await s3.start();
    }
    await server.kill('SIGTERM');
    expectOnlyJson(server, [/redis unreachable/, /"status":503/, /"msg":"stopped"/]);
  });
});
