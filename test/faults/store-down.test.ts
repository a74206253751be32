import { createHash, randomBytes } from 'node:crypto';
import { truncate } from 'node:fs/promises';
import { request } from 'node:http';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Downloads slowly, calling `onFirstData` at the first chunk (so most of
 * the object is still unread when it runs); resolves with what arrived.
 */
function slowDownload(url: string, requestId: string, onFirstData: () => void): Promise<{ received: number; complete: boolean }> {
  return new Promise((resolve) => {
    let received = 0;
    const req = request(url, { headers: { 'X-Request-Id': requestId } }, (res) => {
      res.once('data', onFirstData);
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        res.pause();
        setTimeout(() => res.resume(), 5);
      });
      res.on('end', () => resolve({ received, complete: res.complete }));
      res.on('error', () => resolve({ received, complete: false }));
      res.on('close', () => resolve({ received, complete: res.complete }));
    });
    req.on('error', () => resolve({ received: 0, complete: false }));
    req.end();
  });
}

/** store_errors as /metrics shows it. */
async function storeErrors(t: TestServer): Promise<number> {
  const text = (await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken })).text;
  return Number(/^dropstream_store_errors_total (\d+)$/m.exec(text)?.[1]);
}

/** The failure is logged once, with the request id, and the request line says 503 rather than 499 (the client did not leave). */
async function expectLoggedOnce(log: CapturedLog, requestId: string) {
  // The request line is written when the response closes, after the failure that cut it was logged.
  const deadline = Date.now() + 10_000;
  while (!log.requests().some((l) => l.req_id === requestId) && Date.now() < deadline) await sleep(20);
  const lines = log.lines.filter((l) => l.req_id === requestId);
  const failures = lines.filter((l) => l.msg !== 'request');
  expect(failures.map((l) => [l.level, l.msg, l.route])).to.deep.equal([[40, 'response cut: it failed after its headers were sent', '/download/:token']]);
  expect((failures[0]!.err as { type: string }).type).to.equal('ObjectStoreError');
  expect(lines.filter((l) => l.msg === 'request').map((l) => l.status)).to.deep.equal([503]);
}

describe('faults: the object store stops mid-download and comes back', () => {
  let s3: TestS3;
  let t: TestServer;
  let log: CapturedLog;
  let key: string;
  const content = randomBytes(24 * MiB);
  let file: { file_id: number; public_link: string };

  before(async () => {
    s3 = await startTestS3();
    log = captureLog('info');
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('downloads')), S3_PART_SIZE: String(5 * MiB) }, log.logger);
    ({ apiKey: key } = await t.account());
    file = (await uploadFile(t.server.url, key, 'big.bin', content)).body;
  });
  after(async () => {
    await t.close();
    await s3.close();
  });

  it('when the store stops while a download streams, then the download is cut (not completed, not counted), logged once, counted in store_errors, and the server keeps serving', async () => {
    const errorsBefore = await storeErrors(t);
    const outcome = await slowDownload(t.url(file.public_link), 'store-stops', () => void s3.stop());
    expect(outcome.complete).to.equal(false);
    await expectLoggedOnce(log, 'store-stops');
    expect(await storeErrors(t)).to.equal(errorsBefore + 1);
    expect(outcome.received).to.be.below(content.length);
    expect((await call(t.url('/healthz'))).status).to.equal(200);
    const info = await call(t.url(`/api/v1/files/${file.file_id}`), { key });
    expect(info.body.file.download_count).to.equal(0);
    const unavailable = await call(t.url(file.public_link));
    expect(unavailable.status).to.equal(503);
    expect(unavailable.body.error.code).to.equal('store_unavailable');
  });

  it('when the store is back, then downloads work again without a restart', async () => {
    await s3.start();
    const res = await fetch(t.url(file.public_link));
    expect(res.status).to.equal(200);
    expect(sha(Buffer.from(await res.arrayBuffer()))).to.equal(sha(content));
  });
});

describe('faults: a local object shorter than its record (truncated on disk mid-download)', () => {
  let t: TestServer;
  let log: CapturedLog;

  before(async () => {
    log = captureLog('info');
    t = await startTestServer('pglite', {}, log.logger);
  });
  after(async () => {
    await t.close();
  });

  it('when the file shrinks while it streams, then the download is cut, not counted, logged once with its request id and counted in store_errors', async () => {
    const { apiKey } = await t.account();
    const content = randomBytes(16 * MiB);
    const up = (await uploadFile(t.server.url, apiKey, 'shrinks.bin', content)).body;
    const [path] = await t.objects();
    const outcome = await slowDownload(t.url(up.public_link), 'object-shrinks', () => void truncate(path!, MiB));
    expect(outcome.complete).to.equal(false);
    expect(outcome.received).to.be.below(content.length);
    await expectLoggedOnce(log, 'object-shrinks');
    expect(await storeErrors(t)).to.equal(1);
    expect((await call(t.url(`/api/v1/files/${up.file_id}`), { key: apiKey })).body.file.download_count).to.equal(0);
  });
});
