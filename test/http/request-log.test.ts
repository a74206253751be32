// The request log as an operator reads it: one line per request, with the
// bytes that really crossed the connection, health probes kept out of the
// info level, hang-ups as one quiet line, and no secret on any line.
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { expect } from 'chai';
import { call, upload, uploadFile } from '../helpers/client.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { BOUNDARY, multipartBody, multipartType } from '../helpers/multipart.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { eventually } from '../helpers/raw-upload.js';
import { create, head, uploadUrl } from '../helpers/tus.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('request log', () => {
  let t: TestServer;
  let log: CapturedLog;
  let key: string;

  before(async () => {
    log = captureLog('info');
    t = await startTestServer('pglite', {}, log.logger);
    ({ apiKey: key } = await t.account());
  });
  after(async () => {
    await t.close();
  });

  /** The request line of the request that sent this X-Request-Id. */
  const lineOf = (id: string) => eventually(async () => log.requests().find((l) => l.req_id === id), (l) => l !== undefined);

  it('when a 48,213-byte file is uploaded, then bytes_in counts the whole request (headers and body), not 0', async () => {
    const body = multipartBody([{ name: 'file', filename: 'report.pdf', content: randomBytes(48_213) }]);
    const res = await call(t.url('/api/v1/files/upload'), {
      method: 'POST',
      key,
      headers: { 'Content-Type': multipartType(), 'X-Request-Id': 'upload-48213' },
      body,
    });
    expect(res.status).to.equal(201);
    const line = (await lineOf('upload-48213'))!;
    expect(line.status).to.equal(201);
    // The body plus a few hundred bytes of request line and headers.
    expect(line.bytes_in).to.be.within(body.length, body.length + 1024);
    expect(line.bytes_out).to.be.within(res.text.length, res.text.length + 1024);
  });

  it('when several requests share one keep-alive connection, then each line counts only its own bytes', async () => {
    const agentless = (id: string, path: string) =>
      call(t.url(path), { key, headers: { 'X-Request-Id': id } });
    // fetch keeps its connections alive: these run one after another on one socket.
    await agentless('keepalive-1', '/api/v1/stats');
    await agentless('keepalive-2', '/api/v1/stats');
    const [first, second] = [(await lineOf('keepalive-1'))!, (await lineOf('keepalive-2'))!];
    for (const line of [first, second]) {
      expect(line.bytes_in).to.be.within(100, 1024);
      expect(line.bytes_out).to.be.within(100, 2048);
    }
  });

  it('when the health probes are called, then they write no info line (they do at debug)', async () => {
    const before = log.lines.length;
    expect((await call(t.url('/healthz'), { headers: { 'X-Request-Id': 'probe-1' } })).status).to.equal(200);
    expect((await call(t.url('/readyz'), { headers: { 'X-Request-Id': 'probe-2' } })).status).to.equal(200);
    expect((await call(t.url('/api/v1/stats'), { key, headers: { 'X-Request-Id': 'after-probes' } })).status).to.equal(200);
    await lineOf('after-probes');
    expect(log.lines.slice(before).map((l) => l.req_id)).to.deep.equal(['after-probes']);

    const debug = captureLog('debug');
    const t2 = await startTestServer('pglite', {}, debug.logger);
    try {
      await call(t2.url('/healthz'), { headers: { 'X-Request-Id': 'probe-debug' } });
      const line = await eventually(async () => debug.requests().find((l) => l.req_id === 'probe-debug'), (l) => l !== undefined);
      expect(line).to.include({ level: 20, route: '/healthz', status: 200 });
    } finally {
      await t2.close();
    }
  });

  it('when a client hangs up mid-upload, then one info line with status 499 and nothing at warn or above, no stack', async () => {
    const before = log.lines.length;
    await new Promise<void>((resolve) => {
      const req = request(t.url('/api/v1/files/upload'), {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType(), 'X-Request-Id': 'hang-up' },
      });
      req.on('error', () => resolve());
      req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n`);
      req.write(randomBytes(200_000), () => setTimeout(() => req.destroy(), 100));
      req.on('close', () => resolve());
    });
    const line = (await lineOf('hang-up'))!;
    // The line is written at the hang-up; the upload's clean-up ends when its slot (UPLOAD_CONCURRENCY) is free again.
    const inFlight = async () => (await t.server.metrics.registry.getSingleMetric('dropstream_uploads_in_flight')!.get()).values[0]?.value ?? 0;
    const deadline = Date.now() + 10_000;
    while ((await inFlight()) !== 0 && Date.now() < deadline) await sleep(20);
    expect(await inFlight()).to.equal(0);
    const lines = log.lines.slice(before);
    expect(line).to.include({ level: 30, status: 499 });
    expect(lines.filter((l) => l.level >= 40), 'lines at warn or above').to.deep.equal([]);
    expect(log.raw.slice(before).join('')).to.not.include('stack');
  });

  it('when a client hangs up mid-PATCH (tus), then one info line with status 499 and the bytes it sent, nothing at warn or above, and the bytes are kept', async () => {
    const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: 1_000_000 }));
    const before = log.lines.length;
    await new Promise<void>((resolve) => {
      const req = request(url, {
        method: 'PATCH',
        headers: { Authorization: `Bearer ${key}`, 'Tus-Resumable': '1.0.0', 'Content-Type': 'application/offset+octet-stream', 'Upload-Offset': '0', 'Content-Length': '1000000', 'X-Request-Id': 'tus-hang-up' },
      });
      req.on('error', () => resolve());
      req.write(randomBytes(300_000), () => setTimeout(() => req.destroy(), 100));
      req.on('close', () => resolve());
    });
    const line = (await lineOf('tus-hang-up'))!;
    expect(line).to.include({ level: 30, status: 499, route: '/api/v1/uploads/:id' });
    expect(line.bytes_in).to.be.within(300_000, 301_024);
    // The line is written at the hang-up; the PATCH's work ends when what it got is committed (HEAD shows the offset).
    const deadline = Date.now() + 10_000;
    let offset = (await head(url, key)).headers.get('upload-offset');
    while (offset !== '300000' && Date.now() < deadline) {
      await sleep(20);
      offset = (await head(url, key)).headers.get('upload-offset');
    }
    expect(offset).to.equal('300000');
    expect(log.lines.slice(before).filter((l) => l.level >= 40), 'lines at warn or above').to.deep.equal([]);
  });

  it('when a complete download is logged, then its status is 200 and bytes_out covers the body', async () => {
    const up = await uploadFile(t.server.url, key, 'logged.bin', randomBytes(100_000));
    const res = await fetch(t.url(up.body.public_link), { headers: { 'X-Request-Id': 'download-ok' } });
    expect((await res.arrayBuffer()).byteLength).to.equal(100_000);
    const line = (await lineOf('download-ok'))!;
    expect(line).to.include({ route: '/download/:token', status: 200 });
    expect(line.bytes_out).to.be.within(100_000, 101_024);
  });
});

describe('request log: no secret on any line, at trace level', () => {
  let t: TestServer;
  let log: CapturedLog;

  before(async () => {
    log = captureLog('trace');
    t = await startTestServer('pglite', {}, log.logger);
  });
  after(async () => {
    await t.close();
  });

  it('when keys, link tokens and the admin token are used, refused and rotated, then none of them, nor Authorization, is in the log', async () => {
    const { accountId, apiKey } = await t.account();
    const secrets: string[] = [apiKey, t.server.adminToken];
    const up = await uploadFile(t.server.url, apiKey, 'secret.txt', 'content');
    const token = up.body.public_link.split('/').pop()!;
    secrets.push(token);
    await (await fetch(t.url(up.body.public_link))).arrayBuffer();
    await (await fetch(t.url(`/download/${token}x`))).arrayBuffer();
    await call(t.url('/api/v1/stats'), { key: `${apiKey}x` });
    await call(t.url('/api/v1/stats'), { headers: { Authorization: `Basic ${Buffer.from(`u:${apiKey}`).toString('base64')}` } });
    await call(t.url(`/api/v1/files?page=${apiKey}`), { key: apiKey });
    await upload(t.server.url, apiKey, [{ name: `field-${apiKey}`, content: apiKey }]);
    const rotated = await t.admin('POST', `/admin/accounts/${accountId}/keys`);
    secrets.push(rotated.api_key);
    await call(`${t.server.adminUrl}/admin/plans`, { key: `${t.server.adminToken}x`, headers: { 'X-Request-Id': 'last-one' } });
    // Lines are written in the order requests close: once the last request's is there, every one is.
    expect(await eventually(async () => log.requests().some((l) => l.req_id === 'last-one'), (found) => found)).to.equal(true);

    const text = log.raw.join('');
    expect(log.requests().length).to.be.at.least(9);
    for (const secret of secrets) expect(text).to.not.include(secret);
    expect(text.toLowerCase()).to.not.include('authorization');
    expect(text.toLowerCase()).to.not.include('bearer');
  });
});
