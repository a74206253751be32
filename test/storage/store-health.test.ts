// /readyz's view of the store from the calls requests make: which kinds of
// call are timing out, and when they count as healthy again.
import { expect } from 'chai';
import { CompleteMultipartUploadCommand, S3Client } from '@aws-sdk/client-s3';
import { deadlineOf, operationOf } from '../../src/storage/s3-handler.js';
import { StoreHealth } from '../../src/storage/store-health.js';
import { idleBounded, idleTimed, withDeadline } from '../../src/storage/store-deadlines.js';
import { StoreTimeoutError } from '../../src/storage/object-store.js';

describe('store health (for /readyz)', () => {
  let now = 0;
  const health = () => new StoreHealth(30_000, () => now);

  it('when part uploads time out, then they count until a part upload succeeds; a HEAD that answers does not clear them', () => {
    const h = health();
    h.observe('upload_part', 'timeout');
    h.observe('head_object', 'ok');
    expect(h.timingOut()).to.deep.equal(['upload_part']);
    h.observe('upload_part', 'failed');
    expect(h.timingOut()).to.deep.equal(['upload_part']);
    h.observe('upload_part', 'ok');
    expect(h.timingOut()).to.deep.equal([]);
  });

  it('when no call of that kind comes after a timeout, then it stops counting after the window', () => {
    const h = health();
    h.observe('put_object', 'timeout');
    now += 29_000;
    expect(h.timingOut()).to.deep.equal(['put_object']);
    now += 2_000;
    expect(h.timingOut()).to.deep.equal([]);
  });
});

describe('store deadlines', () => {
  it('when work outlasts its deadline, then StoreTimeoutError at the deadline, the signal aborted and the outcome reported', async () => {
    const seen: string[] = [];
    let signal: AbortSignal | undefined;
    const started = Date.now();
    const err = await withDeadline('head_object', 100, (s) => ((signal = s), new Promise(() => {})), (op, outcome) => seen.push(`${op}:${outcome}`)).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(StoreTimeoutError);
    expect(Date.now() - started).to.be.within(90, 2000);
    expect(signal?.aborted).to.equal(true);
    expect(seen).to.deep.equal(['head_object:timeout']);
  });

  it('when a read stalls between chunks, then it fails after the idle deadline; a consumer that is slow itself is not cut', async () => {
    async function* source(gapMs: number) {
      yield Buffer.from('a');
      await new Promise((r) => setTimeout(r, gapMs));
      yield Buffer.from('b');
    }
    const stalled: Buffer[] = [];
    const err = await (async () => {
      for await (const chunk of idleBounded(source(2000), 'get_object', 100)) stalled.push(chunk);
    })().catch((e: unknown) => e);
    expect(err).to.be.instanceOf(StoreTimeoutError);
    expect(Buffer.concat(stalled).toString()).to.equal('a');

    const slow: Buffer[] = [];
    for await (const chunk of idleBounded(source(0), 'get_object', 100)) {
      slow.push(chunk);
      await new Promise((r) => setTimeout(r, 300)); // the consumer, not the store, takes its time
    }
    expect(Buffer.concat(slow).toString()).to.equal('ab');
  });

  it('when a piped source falls silent while its consumer reads, then idleTimed destroys it with StoreTimeoutError; a slow consumer, or one not reading yet, is no timeout', async () => {
    const { PassThrough, Readable, Writable } = await import('node:stream');
    const { pipeline } = await import('node:stream/promises');
    // A source that pushes `a`, then nothing until it is ended by hand.
    const silent = () => new Readable({ read() {} });
    const seen: string[] = [];
    const stalled = idleTimed(silent(), 'get_object', 100, (op, outcome) => seen.push(`${op} ${outcome}`));
    stalled.push('a');
    const received: Buffer[] = [];
    const err = await pipeline(stalled, new Writable({ write: (chunk: Buffer, _e, done) => (received.push(chunk), done()) })).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(StoreTimeoutError);
    expect(Buffer.concat(received).toString()).to.equal('a');
    expect(seen).to.deep.equal(['get_object timeout']);

    // Not read for 300 ms (no consumer yet), then read by a consumer that takes 300 ms per chunk: no timeout.
    const waiting = idleTimed(silent(), 'get_object', 100);
    waiting.push('b');
    await new Promise((r) => setTimeout(r, 300));
    const slowly: Buffer[] = [];
    const consumer = new Writable({ highWaterMark: 1, write: (chunk: Buffer, _e, done) => void setTimeout(() => (slowly.push(chunk), done()), 300) });
    const done = pipeline(waiting, new PassThrough({ highWaterMark: 1 }), consumer);
    waiting.push('c');
    await new Promise((r) => setTimeout(r, 50));
    waiting.push(null);
    await done;
    expect(Buffer.concat(slowly).toString()).to.equal('bc');
  });

  it('when S3 requests are named, then each kind gets its operation', () => {
    const op = (method: string, query: Record<string, string> = {}) => operationOf({ method, query });
    expect(op('PUT', { partNumber: '1', uploadId: 'u' })).to.equal('upload_part');
    expect(op('PUT')).to.equal('put_object');
    expect(op('POST', { uploads: '' })).to.equal('create_multipart');
    expect(op('POST', { uploadId: 'u' })).to.equal('complete_multipart');
    expect(op('DELETE', { uploadId: 'u' })).to.equal('abort_multipart');
    expect(op('DELETE')).to.equal('delete_object');
    expect(op('HEAD')).to.equal('head_object');
    expect(op('GET')).to.equal('get_object');
    expect(op('GET', { uploads: '' })).to.equal('list_uploads');
  });

  it('when a multipart upload is completed, then its deadline is that of a write of its parts; a part gets a write of its bytes, a HEAD the call deadline', async () => {
    const MiB = 1024 * 1024;
    // The request exactly as the SDK hands it to the handler.
    let seen: Parameters<typeof deadlineOf>[0] | undefined;
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      maxAttempts: 1,
      requestHandler: {
        handle: async (request: Parameters<typeof deadlineOf>[0]) => {
          seen = request;
          throw new Error('captured');
        },
      } as never,
    });
    const Parts = Array.from({ length: 8 }, (_, i) => ({ PartNumber: i + 1, ETag: `"e${i}"` }));
    await client.send(new CompleteMultipartUploadCommand({ Bucket: 'b', Key: 'k', UploadId: 'u', MultipartUpload: { Parts } })).catch(() => undefined);
    client.destroy();
    const deadlines = { callMs: 10_000, minRate: 512 * 1024, readIdleMs: 30_000 };
    // 8 parts of 8 MiB at 512 KiB/s: 128 s, plus the call's 10 s.
    expect(deadlineOf(seen!, deadlines, 8 * MiB)).to.equal(138_000);
    expect(deadlineOf({ method: 'PUT', query: { partNumber: '1', uploadId: 'u' }, headers: { 'content-length': String(8 * MiB) } }, deadlines, 8 * MiB)).to.equal(26_000);
    expect(deadlineOf({ method: 'HEAD', query: {}, headers: {} }, deadlines, 8 * MiB)).to.equal(10_000);
  });
});
