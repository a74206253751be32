// Issue 50, item 1: slow JSON bodies took every connection. With one valid
// key, 97 sockets each sent `POST /api/v1/webhooks` with `Content-Length:
// 16000` and then one byte every 10 s; at MAX_CONNECTIONS 96 (`ulimit -n
// 256`) every new client was reset for the whole attack, since a request
// whose head is complete was never shed and its body had no deadline, only
// IDLE_TIMEOUT's 60 s of total silence. Now a JSON body arrives within
// BODY_TIMEOUT or is 408 (connection closed), a connection waiting on its
// client's JSON body is shed at the cap like an idle one, and an account's
// requests in progress are capped (ACCOUNT_REQUESTS_IN_FLIGHT). The database
// plays no part here: PGlite only.
import { request } from 'node:http';
import { connect } from 'node:net';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { eventually, sleep, startRawUpload } from '../helpers/raw-upload.js';
import { BOUNDARY } from '../helpers/multipart.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A plan as any: requests enough for the attack, uploads at the default concurrency (ACCOUNT_UPLOAD_CONCURRENCY, 8). */
const ANY_PLAN = { api_access: true, requests_per_minute: 100_000, requests_per_day: 1_000_000, max_file_size: 1024 * 1024, daily_uploads: 1000 };

/** The body of a valid new webhook, padded with JSON whitespace to `length` bytes: any prefix of it is a body still coming. */
function webhookBody(length: number): string {
  const start = '{"url":"http://127.0.0.1:9/hook"';
  return `${start}${' '.repeat(length - start.length - 1)}}`;
}

interface SlowBody {
  /** Closes the connection from our side. */
  destroy(): void;
  /** Whether the connection is closed (by either side). */
  closed(): boolean;
  /** What the server sent so far. */
  received(): string;
  /** Resolves when the connection closes, with what the server sent. */
  done: Promise<string>;
  /** Resolves once the head is written (or the connection failed). */
  sent: Promise<void>;
}

/**
 * A client sending `POST path` with a JSON body of `length` bytes: the head
 * and the body's first 32 bytes at once, then one byte every `everyMs`
 * (never, when 0), so the connection is never silent for long.
 */
function slowJson(baseUrl: string, key: string, { path = '/api/v1/webhooks', length = 16_000, everyMs = 0, localAddress }: { path?: string; length?: number; everyMs?: number; localAddress?: string } = {}): SlowBody {
  const { hostname, port } = new URL(baseUrl);
  const body = webhookBody(length);
  const socket = connect({ host: hostname, port: Number(port), localAddress });
  let offset = 32;
  let data = '';
  let closed = false;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (data += chunk));
  socket.on('error', () => {});
  const written = new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n${body.slice(0, offset)}`,
      () => resolve(),
    );
  });
  const timer = everyMs > 0 ? setInterval(() => offset < length - 1 && socket.write(body[offset++]!), everyMs) : undefined;
  const done = new Promise<string>((resolve) =>
    socket.once('close', () => {
      closed = true;
      clearInterval(timer);
      resolve(data);
    }),
  );
  return {
    destroy: () => socket.destroy(),
    closed: () => closed,
    received: () => data,
    done,
    sent: written,
  };
}

/** The status, headers and JSON body of the first response in `raw`. */
function parseResponse(raw: string): { status: number; headers: string; body: any } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
  const end = raw.indexOf('\r\n\r\n');
  const headers = end < 0 ? raw : raw.slice(0, end);
  let body: unknown;
  try {
    body = JSON.parse(raw.slice(end + 4));
  } catch {}
  return { status, headers, body };
}

/** Resolves with `promise`'s value, or with `fallback` after `ms`. */
const within = <T>(promise: Promise<T>, ms: number, fallback: T) =>
  Promise.race([promise, new Promise<T>((resolve) => setTimeout(() => resolve(fallback), ms).unref())]);

/** GET `path` on a new connection from `localAddress`: its status, or the error that ended it (ECONNRESET when refused at the cap). */
function fresh(baseUrl: string, path: string, localAddress: string): Promise<string> {
  return new Promise((resolve) => {
    const req = request(new URL(path, baseUrl), { agent: false, localAddress, timeout: 10_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
      res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('no answer in 10 s'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

describe('issue 50, item 1: slow JSON bodies', function () {
  this.timeout(60_000);

  describe('BODY_TIMEOUT', () => {
    let t: TestServer;
    let key: string;
    before(async () => {
      t = await startTestServer('pglite', { BODY_TIMEOUT: '2' });
      key = (await t.account()).apiKey;
    });
    after(async () => {
      await t.close();
    });

    it('when a JSON body keeps coming a byte at a time past BODY_TIMEOUT, then it is answered 408 body_timeout and the connection is closed', async () => {
      const started = Date.now();
      const client = slowJson(t.server.url, key, { everyMs: 250 });
      // IDLE_TIMEOUT (60 s) never fires on a connection that sends every 250 ms.
      const raw = await within(client.done, 20_000, 'still open after 20 s');
      client.destroy();
      const answer = parseResponse(raw);
      expect(answer.status, raw).to.equal(408);
      expect(answer.body.error.code).to.equal('body_timeout');
      expect(answer.headers).to.match(/^Connection: close$/im);
      expect(Date.now() - started, 'not before BODY_TIMEOUT').to.be.at.least(1900);
    });

    it('when an upload body comes slowly for longer than BODY_TIMEOUT, then it is not cut: uploads keep their minimum rate instead', async () => {
      const { req, outcome } = startRawUpload(t.server.url, key, 'slow.bin');
      const started = Date.now();
      // 1 KiB every 250 ms (4 KiB/s, above UPLOAD_MIN_RATE) for twice BODY_TIMEOUT.
      while (Date.now() - started < 4000 && !req.destroyed) {
        req.write(Buffer.alloc(1024, 7));
        await sleep(250);
      }
      req.end(`\r\n--${BOUNDARY}--\r\n`);
      const result = await outcome;
      expect(result.status, result.body ?? result.error).to.equal(201);
    });
  });

  describe('ACCOUNT_REQUESTS_IN_FLIGHT', () => {
    let t: TestServer;
    before(async () => {
      t = await startTestServer('pglite', { ACCOUNT_REQUESTS_IN_FLIGHT: '2', BODY_TIMEOUT: '120' });
      // One upload at once: the account's cap is 2 + 1.
      await t.plan('one-upload', { ...ANY_PLAN, concurrent_uploads: 1 });
    });
    after(async () => {
      await t.close();
    });

    it('when an account has its cap of requests in progress, then its next request is 429 too_many_requests_in_flight with Retry-After, another account is served, and a request ending frees its place', async () => {
      const { apiKey: key } = await t.account('one-upload');
      const { apiKey: otherKey } = await t.account('one-upload');
      const held = [slowJson(t.server.url, key), slowJson(t.server.url, key), slowJson(t.server.url, key)];
      try {
        const stats = () => call(t.url('/api/v1/stats'), { key });
        const refused = await eventually(stats, (res) => res.status === 429, 10_000);
        expect(refused.status, refused.text).to.equal(429);
        expect(refused.body.error.code).to.equal('too_many_requests_in_flight');
        expect(refused.headers.get('Retry-After')).to.equal('1');
        expect((await call(t.url('/api/v1/stats'), { key: otherKey })).status, 'another account').to.equal(200);
        held[0]!.destroy();
        expect((await eventually(stats, (res) => res.status === 200, 10_000)).status, 'after one hung up').to.equal(200);
      } finally {
        for (const client of held) client.destroy();
      }
    });
  });

  describe('the attack of the issue: 97 slow bodies at MAX_CONNECTIONS 96', () => {
    let t: TestServer;
    let key: string;
    before(async () => {
      // The numbers, with BODY_TIMEOUT and the attack's pace five times faster (10 s -> 2 s).
      t = await startTestServer('pglite', { MAX_CONNECTIONS: '96', BODY_TIMEOUT: '2' });
      await t.plan('any', ANY_PLAN);
      key = (await t.account('any')).apiKey;
    });
    after(async () => {
      await t.close();
    });

    it('when one key keeps 97 connections each trickling a JSON body, then a fresh client from another address is answered every time, and every attack connection is answered or closed', async () => {
      // The attacker opens a new connection for each one closed, so it holds
      // every place it can (at the first burst the cap may close more than
      // one connection still sending its head, leaving a place free).
      const attack: SlowBody[] = [];
      let attacking = true;
      const open = () => {
        const client = slowJson(t.server.url, key, { everyMs: 2000 });
        attack.push(client);
        void client.done.then(() => attacking && setTimeout(() => attacking && open(), 100));
      };
      try {
        for (let i = 0; i < 97; i++) open();
        await Promise.all(attack.map((c) => c.sent));
        const probes: string[] = [];
        const started = Date.now();
        // GET /app every 0.5 s for three times BODY_TIMEOUT (the issue: every 2 s for 40 s).
        while (Date.now() - started < 6000) {
          const next = sleep(500);
          probes.push(await fresh(t.server.url, '/app', '127.0.0.2'));
          await next;
        }
        attacking = false;
        expect(probes.filter((p) => !/^\d{3}$/.test(p)), `probes: ${probes.join(' ')}`).to.deep.equal([]);
        // Within BODY_TIMEOUT none is left waiting unanswered with its request in progress.
        const unanswered = await eventually(
          async () => attack.filter((c) => !c.closed() && parseResponse(c.received()).status === 0).length,
          (n) => n === 0,
          10_000,
        );
        expect(unanswered, 'attack connections open without an answer').to.equal(0);
        const statuses = attack.map((c) => parseResponse(c.received()).status).filter((s) => s !== 0);
        expect(statuses.filter((s) => s !== 408 && s !== 429), 'answers other than 408 and 429').to.deep.equal([]);
      } finally {
        attacking = false;
        for (const client of attack) client.destroy();
      }
    });
  });
});
