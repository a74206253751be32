import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { request } from 'node:http';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { BOUNDARY, multipartType } from '../helpers/multipart.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Opens a raw connection, sends `text`, and resolves with how long until the server closed it. */
function heldOpen(port: number, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    socket.on('data', () => {});
    socket.on('close', () => resolve(Date.now() - started));
    socket.on('error', () => {});
    setTimeout(() => reject(new Error('still open after 8 s')), 8000).unref();
  });
}

describe('listener timeouts (HEADERS_TIMEOUT=1, IDLE_TIMEOUT=2)', () => {
  let t: TestServer;
  let port: number;
  before(async () => {
    t = await startTestServer('pglite', { HEADERS_TIMEOUT: '1', IDLE_TIMEOUT: '2' });
    port = Number(new URL(t.server.url).port);
  });
  after(async () => {
    await t.close();
  });

  it('when a client sends half its headers and stalls, then the connection is closed within a few seconds', async () => {
    const ms = await heldOpen(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    expect(ms).to.be.below(4000);
  });

  it('when a request cannot be parsed (headers too large, garbage), then the answer is our JSON error shape', async () => {
    const big = await call(t.url('/healthz'), { headers: { 'X-Big': 'x'.repeat(20_000) } });
    expect(big.status).to.equal(431);
    expect(big.body).to.deep.equal({ success: false, error: { code: 'headers_too_large', message: 'The request headers are too large' } });
    const raw = await new Promise<string>((resolve) => {
      let text = '';
      const socket = connect(port, '127.0.0.1', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      socket.on('data', (d) => (text += d));
      socket.on('close', () => resolve(text));
      socket.on('error', () => resolve(text));
    });
    expect(raw).to.match(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(raw).to.include('{"success":false,"error":{"code":"bad_request"');
  });

  it('when an upload body stalls, then the connection is dropped and nothing is stored', async () => {
    const { apiKey } = await t.account();
    const before = await t.objects();
    const head = `POST /api/v1/files/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: ${multipartType()}\r\nContent-Length: 100000\r\n\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="stall.bin"\r\n\r\n`;
    const ms = await heldOpen(port, `${head}${'x'.repeat(1000)}`);
    expect(ms).to.be.below(6000);
    for (let i = 0; i < 50 && (await t.tempFiles()).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await t.objects()).to.deep.equal(before);
    expect(await t.tempFiles()).to.deep.equal([]);
    expect((await call(t.url('/api/v1/stats'), { key: apiKey })).body.stats.total_files).to.equal(0);
  });

  it('when an upload keeps sending for longer than both timeouts, then it completes', async () => {
    const { apiKey } = await t.account();
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${t.server.url}/api/v1/files/upload`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': multipartType() },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="steady.bin"\r\n\r\n`);
      let sent = 0;
      const timer = setInterval(() => {
        req.write(randomBytes(1024));
        if (++sent === 14) {
          clearInterval(timer);
          req.end(`\r\n--${BOUNDARY}--\r\n`);
        }
      }, 250);
    });
    expect(status).to.equal(201);
  });
});
