// Downloads read from S3 into reused buffers (issue 54, src/storage/pooled-read.ts):
// the response-head reader; a slow client holding every buffer pauses the
// store's socket with memory bounded; ranges; and the store failing, stalling
// or answering an error, from s3rver and from a fake store that misbehaves
// on cue.
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { bodyLength, errorCode, readResponseHead, ResponseHeadError, servedStart } from '../../src/storage/http-head.js';
import { ObjectNotFoundError, ObjectStoreError, StoreTimeoutError } from '../../src/storage/object-store.js';
import { BufferShelf, openPooledRead, PooledRead, StoreAnswerError, UnsupportedAnswer, type PooledSink } from '../../src/storage/pooled-read.js';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A client: keeps what it is sent; `hold` keeps each write's callback until release() (a client slower than the store). */
class Sink implements PooledSink {
  readonly chunks: Buffer[] = [];
  /** The distinct memory the chunks were sent from: the read buffers in use. */
  readonly buffers = new Set<ArrayBufferLike>();
  readonly held: (() => void)[] = [];
  ended = false;
  constructor(private readonly hold = false) {}
  write(chunk: Buffer, done: () => void): boolean {
    this.buffers.add(chunk.buffer);
    this.chunks.push(Buffer.from(chunk));
    if (this.hold) this.held.push(done);
    else setImmediate(done);
    return true;
  }
  end(): void {
    this.ended = true;
  }
  release(count = 1): void {
    for (const done of this.held.splice(0, count)) done();
  }
  get bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** A store on a raw socket: `answer` writes what it likes to each request's connection. */
async function fakeStore(answer: (socket: net.Socket) => void): Promise<{ url: URL; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('data', () => answer(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    url: new URL(`http://127.0.0.1:${port}/bucket/key?X-Amz-Signature=x`),
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const options = (url: URL, more: Partial<Parameters<typeof openPooledRead>[0]> = {}) => ({ url, shelf: new BufferShelf(), buffers: 8, headMs: 2_000, idleMs: 2_000, ...more });

describe('pooled reads: the response head', () => {
  it('when a head has come whole, then its status, headers (lower-case, repeats joined) and size; before its blank line, nothing', () => {
    const text = 'HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 5-14/100\r\nX-A: 1\r\nx-a: 2\r\n\r\nbody';
    const head = readResponseHead(Buffer.from(text))!;
    expect(head).to.deep.equal({ status: 206, headers: { 'content-length': '10', 'content-range': 'bytes 5-14/100', 'x-a': '1, 2' }, size: text.length - 4 });
    expect(bodyLength(head)).to.equal(10);
    expect(servedStart(head)).to.equal(5);
    expect(readResponseHead(Buffer.from(text.slice(0, 40)))).to.equal(undefined);
  });

  it('when a body is chunked or has no length, then bodyLength says so; a malformed or huge head, a 206 without Content-Range, are refused', () => {
    const head = (s: string) => readResponseHead(Buffer.from(`${s}\r\n\r\n`))!;
    expect(bodyLength(head('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked'))).to.equal(undefined);
    // RFC 9112 6.3: Transfer-Encoding overrides a Content-Length sent with it.
    expect(bodyLength(head('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5'))).to.equal(undefined);
    expect(bodyLength(head('HTTP/1.1 200 OK'))).to.equal(undefined);
    expect(() => head('HTTP/1.1 200 OK\r\nno colon')).to.throw(ResponseHeadError);
    expect(() => head('ICY 200 OK')).to.throw(ResponseHeadError);
    expect(() => readResponseHead(Buffer.alloc(17 * KiB, 'a'))).to.throw(ResponseHeadError);
    expect(() => servedStart(head('HTTP/1.1 206 Partial Content\r\nContent-Length: 1'))).to.throw(ResponseHeadError);
    expect(errorCode(Buffer.from('<?xml version="1.0"?><Error><Code>SlowDown</Code></Error>'))).to.equal('SlowDown');
  });
});

describe('pooled reads: against S3 and a misbehaving store', function () {
  this.timeout(30_000);
  let s3: TestS3;
  let store: S3ObjectStore;
  const content = randomBytes(6 * MiB);

  before(async () => {
    s3 = await startTestS3();
    const bucket = s3.bucket('pooled');
    store = new S3ObjectStore(s3.storeOptions(bucket, { pooledReads: true }));
    await store.ensureBucket();
    await store.client.send(new PutObjectCommand({ Bucket: bucket, Key: 'object', Body: content }));
  });
  after(async () => {
    await store?.close();
    await s3?.close();
  });

  /** The pooled read of `range` of the test object, with every pause and resume heard. */
  async function read(range?: { start: number; end: number }) {
    const pauses: boolean[] = [];
    store.onPooledPause = (paused) => pauses.push(paused);
    const body = await store.getPooled('object', range);
    expect(body).to.be.instanceOf(PooledRead);
    return { body: body as PooledRead, pauses };
  }

  it('when the client is slower than the store, then the store socket pauses with at most 8 buffers out, and every byte arrives from those 8 buffers', async () => {
    const { body, pauses } = await read();
    const sink = new Sink(true);
    const failures: Error[] = [];
    body.sendTo(sink, content.length, (err) => failures.push(err));
    // Nothing is released: reading must stop by itself.
    await eventually(async () => pauses.length, (n) => n > 0);
    expect(pauses[0]).to.equal(true);
    expect(sink.held.length).to.be.at.most(8);
    const sentAtPause = body.passed;
    expect(sentAtPause).to.be.at.most(8 * 64 * KiB);
    // From now on the client takes everything it holds each time the read
    // has paused (and the rest at the end): every refill must pause again.
    // (Releasing a chunk a millisecond paused only once on a loaded machine,
    // whose store was then the slower side.)
    const reader = setInterval(() => {
      if (pauses.at(-1) === true || body.passed === content.length) sink.release(sink.held.length);
    }, 1);
    try {
      await eventually(async () => sink.ended, (ended) => ended, 20_000);
    } finally {
      clearInterval(reader);
    }
    sink.release(sink.held.length);
    expect(failures).to.deep.equal([]);
    expect(sha(sink.bytes)).to.equal(sha(content));
    expect(sink.buffers.size, 'distinct read buffers').to.be.at.most(8);
    expect(pauses.filter((p) => p).length, 'pauses for the slow client').to.be.greaterThan(1);
  });

  it('when a range across 5 MiB is read, then exactly its bytes; a range s3rver answers whole (bytes=0-0) is cut out', async () => {
    const range = { start: 5 * MiB - 1000, end: 5 * MiB + 70_000 };
    const sink = new Sink();
    (await read(range)).body.sendTo(sink, range.end - range.start + 1, (err) => expect.fail(String(err)));
    await eventually(async () => sink.ended, (ended) => ended);
    expect(sink.bytes.equals(content.subarray(range.start, range.end + 1))).to.equal(true);
    const first = new Sink();
    (await read({ start: 0, end: 0 })).body.sendTo(first, 1, (err) => expect.fail(String(err)));
    await eventually(async () => first.ended, (ended) => ended);
    expect(first.bytes).to.deep.equal(content.subarray(0, 1));
  });

  it('when the key is missing, then ObjectNotFoundError', async () => {
    const err = await store.getPooled('missing').then(() => undefined, (e: unknown) => e);
    expect(err).to.be.instanceOf(ObjectNotFoundError);
  });

  it('when the store answers an error with an S3 body, then StoreAnswerError with its status and code', async () => {
    const fake = await fakeStore((socket) => {
      const body = '<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>';
      socket.end(`HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
    try {
      const err = await openPooledRead(options(fake.url)).then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(StoreAnswerError);
      expect((err as StoreAnswerError).status).to.equal(503);
      expect((err as StoreAnswerError).code).to.equal('SlowDown');
    } finally {
      fake.close();
    }
  });

  it('when the store answers chunked, then UnsupportedAnswer (the store reads it through the SDK instead)', async () => {
    const fake = await fakeStore((socket) => socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'));
    try {
      const err = await openPooledRead(options(fake.url)).then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(UnsupportedAnswer);
    } finally {
      fake.close();
    }
  });

  it('when a store ignores the Range and answers 200 with the whole object, then only the range is sent', async () => {
    const whole = randomBytes(1000);
    const fake = await fakeStore((socket) => socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${whole.length}\r\n\r\n`), whole])));
    try {
      const body = await openPooledRead(options(fake.url, { range: { start: 100, end: 199 } }));
      const sink = new Sink();
      body.sendTo(sink, 100, (err) => expect.fail(String(err)));
      await eventually(async () => sink.ended, (ended) => ended);
      expect(sink.bytes.equals(whole.subarray(100, 200))).to.equal(true);
    } finally {
      fake.close();
    }
  });

  it('when the store answers a download chunked, then the S3 store reads it again through GetObject and the bytes come through', async () => {
    const fake = await fakeStore((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'));
    const warnings: unknown[] = [];
    const chunked = new S3ObjectStore(
      { ...s3.storeOptions('chunked', { pooledReads: true }), endpoint: fake.url.origin, forcePathStyle: true },
      { log: { warn: (msg) => warnings.push(msg), error: () => {} } },
    );
    try {
      const body = await chunked.getPooled('key');
      expect(body).to.not.be.instanceOf(PooledRead);
      const chunks: Buffer[] = [];
      for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk);
      expect(Buffer.concat(chunks).toString()).to.equal('hello');
      expect(String(warnings[0])).to.match(/fell back to GetObject/);
    } finally {
      await chunked.close();
      fake.close();
    }
  });

  it('when the store cuts the connection mid-body, then the body fails with ObjectStoreError and the client is not ended', async () => {
    const fake = await fakeStore((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${MiB}\r\n\r\n`);
      socket.write(randomBytes(100 * KiB), () => socket.destroy());
    });
    try {
      const body = await openPooledRead(options(fake.url));
      const sink = new Sink();
      const failed = new Promise<Error>((resolve) => body.sendTo(sink, MiB, resolve));
      const err = await failed;
      expect(err).to.be.instanceOf(ObjectStoreError);
      expect(err.message).to.match(/bytes short/);
      expect(sink.ended).to.equal(false);
      expect(body.passed).to.be.below(MiB);
    } finally {
      fake.close();
    }
  });

  it('when the store stalls mid-body, then the idle deadline fails the body with StoreTimeoutError (observed as a get_object timeout); a stalled head fails the open', async () => {
    const fake = await fakeStore((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${MiB}\r\n\r\n`);
      socket.write(randomBytes(100 * KiB));
    });
    const silent = await fakeStore(() => {});
    try {
      const seen: string[] = [];
      const body = await openPooledRead(options(fake.url, { idleMs: 300, observe: (op, outcome) => seen.push(`${op} ${outcome}`) }));
      const started = Date.now();
      const err = await new Promise<Error>((resolve) => body.sendTo(new Sink(), MiB, resolve));
      expect(err).to.be.instanceOf(StoreTimeoutError);
      expect(Date.now() - started).to.be.below(2_000);
      expect(seen).to.deep.equal(['get_object ok', 'get_object timeout']);
      const head = await openPooledRead(options(silent.url, { headMs: 300 })).then(() => undefined, (e: unknown) => e);
      expect(head).to.be.instanceOf(StoreTimeoutError);
    } finally {
      fake.close();
      silent.close();
    }
  });

  it('when the store is https, then the body is read over TLS into a few reused buffers (at most 12 for 4 MiB)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pooled-tls-'));
    const body = randomBytes(4 * MiB);
    let server: tls.Server | undefined;
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
      const cert = readFileSync(join(dir, 'cert.pem'));
      server = tls.createServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (socket) => {
        socket.on('error', () => {});
        socket.once('data', () => socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), body])));
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const { port } = server.address() as net.AddressInfo;
      const read = await openPooledRead(options(new URL(`https://127.0.0.1:${port}/bucket/key`), { ca: cert }));
      const sink = new Sink(true);
      read.sendTo(sink, body.length, (err) => expect.fail(String(err)));
      const reader = setInterval(() => sink.release(1), 1);
      await eventually(async () => sink.ended, (ended) => ended).finally(() => clearInterval(reader));
      expect(sha(sink.bytes)).to.equal(sha(body));
      // TLS hands on what it had already decrypted when reading stopped: a
      // few buffers more than 8, taken once and reused (11 for 2 MiB and for
      // 16 MiB alike), not one per read.
      expect(sink.buffers.size).to.be.at.most(12);
    } finally {
      server?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when a slow client holds every buffer longer than the idle deadline, then the download is not cut (the silence is ours, not the store\'s)', async () => {
    const fake = await fakeStore((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${MiB}\r\n\r\n`);
      socket.end(randomBytes(MiB));
    });
    try {
      const pauses: boolean[] = [];
      const body = await openPooledRead(options(fake.url, { idleMs: 200, onPause: (p) => pauses.push(p) }));
      const sink = new Sink(true);
      const failures: Error[] = [];
      body.sendTo(sink, MiB, (err) => failures.push(err));
      await eventually(async () => pauses.length, (n) => n > 0);
      const paused = Date.now();
      // Three idle deadlines pass with every buffer held by the client.
      await eventually(async () => Date.now() - paused, (ms) => ms > 600);
      expect(failures).to.deep.equal([]);
      const reader = setInterval(() => sink.release(sink.held.length), 1);
      await eventually(async () => sink.ended, (ended) => ended).finally(() => clearInterval(reader));
      expect(sink.bytes.length).to.equal(MiB);
    } finally {
      fake.close();
    }
  });
});
