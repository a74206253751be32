import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDatabase } from '../../src/db/client.js';
import { call, uploadFile } from '../helpers/client.js';
import { captureLog } from '../helpers/log-capture.js';
import { BOUNDARY, multipartType } from '../helpers/multipart.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A download read at about 4 MB/s (200 KB every 50 ms) from a raw socket, as
 * a slow client behind a proxy reads it: the bytes it has read, and whether
 * it has read to the end (the server's FIN after the body); `stop()` stops
 * reading altogether.
 */
function slowDownload(url: string) {
  const { hostname, port, pathname } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.write(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  socket.pause();
  const state = { received: 0, ended: false, closed: false };
  socket.on('end', () => (state.ended = true));
  socket.on('close', () => (state.closed = true));
  socket.on('error', () => {});
  let reading = true;
  const timer = setInterval(() => {
    if (!reading) return;
    for (let budget = 200_000, chunk: Buffer | null; budget > 0 && (chunk = socket.read() as Buffer | null) !== null; budget -= chunk.length) {
      state.received += chunk.length;
    }
    // read() returns null at the end until 'end' has been emitted by a read past it.
    if (socket.readableEnded) clearInterval(timer);
  }, 50);
  return {
    state,
    stop: () => (reading = false),
    resume: () => (reading = true),
    destroy: () => {
      clearInterval(timer);
      socket.destroy();
    },
  };
}

/** An upload that has sent its first bytes and waits for finish(). */
function openUpload(url: string, key: string) {
  let finish!: () => void;
  const response = new Promise<{ status: number } | { error: string }>((resolve) => {
    const req = request(`${url}/api/v1/files/upload`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': multipartType() },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode! }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="drain.bin"\r\n\r\n`);
    req.write(randomBytes(2000));
    finish = () => req.end(`\r\n--${BOUNDARY}--\r\n`);
  });
  return { response, finish: () => finish() };
}

describe('operations: metrics', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite');
  });
  after(async () => {
    await t.close();
  });

  it('when scraped without the admin token, then 401', async () => {
    expect((await call(`${t.server.adminUrl}/metrics`)).status).to.equal(401);
  });

  it('when requests, uploads, downloads and refusals happen, then /metrics counts them in Prometheus text', async () => {
    await t.plan('two-a-minute', { api_access: true, requests_per_minute: 2, requests_per_day: 100, max_file_size: 100000, daily_uploads: 10 });
    const { apiKey } = await t.account('two-a-minute');
    const up = await uploadFile(t.server.url, apiKey, 'm.bin', randomBytes(1234));
    await (await fetch(t.url(up.body.public_link))).arrayBuffer();
    expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(200);
    expect((await call(t.url('/api/v1/stats'), { key: apiKey })).status).to.equal(429);

    const scrape = async () => (await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken })).text;
    const text = await eventually(scrape, (scraped) => /dropstream_downloaded_bytes_total 1234\b/.test(scraped));
    expect(text).to.match(/^# TYPE dropstream_http_requests_total counter$/m);
    expect(text).to.match(/^dropstream_http_requests_total\{route="\/api\/v1\/files\/upload",method="POST",status="201"\} 1$/m);
    expect(text).to.match(/^dropstream_http_requests_total\{route="\/api\/v1\/stats",method="GET",status="429"\} 1$/m);
    expect(text).to.match(/^dropstream_http_request_duration_seconds_bucket\{le="\+Inf",route="\/api\/v1\/stats",method="GET",status="200"\} 1$/m);
    expect(text).to.match(/^dropstream_uploaded_bytes_total 1234$/m);
    expect(text).to.match(/^dropstream_downloaded_bytes_total 1234$/m);
    expect(text).to.match(/^dropstream_uploads_in_flight 0$/m);
    expect(text).to.match(/^dropstream_rate_limit_refusals_total\{reason="minute"\} 1$/m);
    expect(text).to.match(/^dropstream_process_resident_memory_bytes \d+$/m);
    // Download routes are labelled by pattern: the token never appears.
    expect(text).to.not.include(up.body.public_link.split('/').pop());
  });
});

describe('operations: readiness', () => {
  let s3: TestS3;
  let t: TestServer;
  before(async () => {
    s3 = await startTestS3();
    t = await startTestServer('pglite', s3.env(s3.bucket('ready')));
  });
  after(async () => {
    await t.close();
    await s3.close();
  });

  it('when every dependency answers, then /readyz is 200 ok and /healthz is 200', async () => {
    expect((await call(t.url('/healthz'))).body).to.include({ status: 'ok' });
    const res = await call(t.url('/readyz'));
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ status: 'ok', checks: { database: 'ok', store: 'ok', redis: 'off' } });
  });

  it('when the object store is down, then /readyz is 503 naming it, and 200 again once it is back', async () => {
    await s3.stop();
    const down = await call(t.url('/readyz'));
    expect(down.status).to.equal(503);
    expect(down.body).to.deep.equal({ status: 'unavailable', checks: { database: 'ok', store: 'down', redis: 'off' } });
    expect((await call(t.url('/healthz'))).status).to.equal(200);
    await s3.start();
    expect((await call(t.url('/readyz'))).status).to.equal(200);
  });
});

describe('operations: graceful shutdown', () => {
  it('when SIGTERM-style shutdown starts during an upload, then the upload finishes within the grace period and new connections are refused', async () => {
    const t = await startTestServer('pglite');
    const { apiKey } = await t.account();
    const upload = openUpload(t.server.url, apiKey);
    expect(await eventually(async () => (await t.tempFiles()).length > 0, (met) => met)).to.equal(true);
    const closing = t.server.close(10);
    const knock = () => fetch(t.url('/healthz')).then(() => 'answered', (err: { cause?: { code?: string } }) => err.cause?.code);
    expect(await eventually(knock, (answer) => answer === 'ECONNREFUSED')).to.equal('ECONNREFUSED');
    upload.finish();
    expect(await upload.response).to.deep.equal({ status: 201 });
    await closing;
    await t.close();
  });

  it('when a slow client is still reading a download at shutdown, then close() waits until it has read every byte, not only until the last one reached the kernel (issue 21)', async function () {
    this.timeout(30_000);
    const log = captureLog();
    const t = await startTestServer('pglite', {}, log.logger);
    const { apiKey } = await t.account();
    const size = 4 * 1024 * 1024;
    const up = await uploadFile(t.server.url, apiKey, 'slow.bin', randomBytes(size));
    const client = slowDownload(t.url(up.body.public_link));
    try {
      while (client.state.received < 1024 * 1024) await new Promise((r) => setTimeout(r, 20));
      // The client pauses for longer than Node's keep-alive timer (5 s + 1 s),
      // which starts once the kernel holds the rest of the response; that
      // timer must not end the connection before the client has read it.
      client.stop();
      const closing = t.server.close(20);
      await new Promise((r) => setTimeout(r, 7_000));
      client.resume();
      await closing;
      // Headers and body: everything was read before close() returned, and the client saw the end.
      expect(client.state.received).to.be.above(size);
      expect(client.state.ended, 'the client had read to the end when close() returned').to.equal(true);
      const stopped = log.lines.find((l) => l.msg === 'stopped');
      expect(stopped).to.include({ cut_connections: 0, still_delivering: 0 });
      expect(log.requests().find((l) => l.route === '/download/:token')).to.include({ status: 200 });
    } finally {
      client.destroy();
      await t.close();
    }
  });

  it('when a client stops reading a download and the grace period ends, then its connection is cut and the request is logged 503 (the server ended it), not 499', async function () {
    this.timeout(30_000);
    const log = captureLog();
    const t = await startTestServer('pglite', {}, log.logger);
    const { apiKey } = await t.account();
    const up = await uploadFile(t.server.url, apiKey, 'stuck.bin', randomBytes(24 * 1024 * 1024));
    const client = slowDownload(t.url(up.body.public_link));
    try {
      while (client.state.received < 1024 * 1024) await new Promise((r) => setTimeout(r, 20));
      client.stop();
      await t.server.close(1);
      expect(client.state.ended).to.equal(false);
      expect(log.lines.find((l) => l.msg === 'stopped')).to.include({ cut_connections: 1 });
      const [line] = await log.requestsAfter(0, '/download/:token');
      expect(line).to.include({ status: 503 });
    } finally {
      client.destroy();
      await t.close();
    }
  });

  it('when an upload outlasts the grace period, then it is cut and leaves no row, no object and no temp file', async () => {
    const t = await startTestServer('pglite');
    const { apiKey } = await t.account();
    const upload = openUpload(t.server.url, apiKey);
    expect(await eventually(async () => (await t.tempFiles()).length > 0, (met) => met)).to.equal(true);
    const started = Date.now();
    await t.server.close(0.3);
    expect(Date.now() - started).to.be.below(5000);
    expect('error' in (await upload.response)).to.equal(true);
    expect(await t.objects()).to.deep.equal([]);
    expect(await t.tempFiles()).to.deep.equal([]);
    const db = await openDatabase({ pgliteDir: join(t.dataDir, 'pglite') });
    try {
      expect(await db.prisma.file.count()).to.equal(0);
      expect(await db.prisma.dailyUpload.aggregate({ _sum: { count: true } }).then((r) => r._sum.count ?? 0)).to.equal(0);
    } finally {
      await db.close();
    }
    await t.close();
  });
});
