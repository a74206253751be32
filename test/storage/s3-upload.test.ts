// The part loop (src/storage/s3-upload.ts) against a fake S3 client, for
// what a real store cannot show on demand: parts finishing out of order, a
// part failing mid-way, each abort path, the buffers it holds, the limits.
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { ObjectStoreError, ObjectTooLargeError } from '../../src/storage/object-store.js';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { SharedPartBuffers } from '../../src/storage/s3-parts.js';
import { appendS3Resumable, startS3Resumable } from '../../src/storage/s3-resumable.js';
import { S3_LIMITS, uploadStream } from '../../src/storage/s3-upload.js';

const KiB = 1024;
const MiB = 1024 * KiB;

interface Call {
  command: string;
  input: Record<string, any>;
  /** A copy of the body as it was when sent (the loop reuses its buffers afterwards). */
  body?: Buffer;
}

/**
 * Answers like S3, after `delay(call)` ms; `fail(call)` returning an error
 * makes that call reject with it. Records every call, the part buffers it
 * was handed and how many parts were in flight at once.
 */
class FakeS3 {
  calls: Call[] = [];
  partBuffers = new Set<ArrayBufferLike>();
  inFlight = 0;
  maxInFlight = 0;

  constructor(
    private readonly options: { delay?: (call: Call) => number; fail?: (call: Call) => Error | undefined } = {},
  ) {}

  get client(): S3Client {
    return { send: (command: any) => this.send(command) } as unknown as S3Client;
  }

  named(command: string): Call[] {
    return this.calls.filter((c) => c.command === command);
  }

  private async send(command: { constructor: { name: string }; input: Record<string, any> }): Promise<Record<string, unknown>> {
    const name = command.constructor.name.replace(/Command$/, '');
    const body = command.input.Body as Buffer | undefined;
    const call: Call = { command: name, input: command.input, body: body ? Buffer.from(body) : undefined };
    this.calls.push(call);
    const isPart = name === 'UploadPart';
    if (isPart) {
      this.partBuffers.add(body!.buffer);
      this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    }
    try {
      await new Promise((resolve) => setTimeout(resolve, this.options.delay?.(call) ?? 0));
      const err = this.options.fail?.(call);
      if (err) throw err;
      if (name === 'CreateMultipartUpload') return { UploadId: 'upload-1' };
      if (isPart) return { ETag: `"etag-${command.input.PartNumber}"` };
      return {};
    } finally {
      if (isPart) this.inFlight -= 1;
    }
  }
}

/** `data` as a stream of `chunk`-byte chunks. */
function streamOf(data: Buffer, chunk = 64 * KiB): Readable {
  const chunks: Buffer[] = [];
  for (let i = 0; i < data.length; i += chunk) chunks.push(data.subarray(i, i + chunk));
  return Readable.from(chunks);
}

/** Emits `bytes` of data, then fails with `err`. */
function failingAfter(bytes: number, err: Error): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= bytes) return this.destroy(err);
      const n = Math.min(64 * KiB, bytes - sent);
      sent += n;
      this.push(Buffer.alloc(n, 1));
    },
  });
}

const upload = (
  s3: FakeS3,
  body: Readable,
  options: { partSize?: number; partsInFlight?: number; shared?: SharedPartBuffers; key?: string; onMultipartStart?: (id: string) => Promise<void> } = {},
) =>
  uploadStream({
    client: s3.client,
    bucket: 'b',
    key: options.key ?? 'k',
    body,
    partSize: options.partSize ?? 5 * MiB,
    partsInFlight: options.partsInFlight ?? 2,
    shared: options.shared,
    onMultipartStart: options.onMultipartStart,
  });

async function rejection(promise: Promise<unknown>): Promise<any> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  expect.fail('expected a rejection');
}

describe('uploadStream (fake S3 client)', () => {
  describe('part ordering and sizes', () => {
    it('when later parts finish first, then Complete lists every part in order with its ETag and the parts hold the body in order', async () => {
      // Part 1 is the slowest, so the parts finish 2, 3, 1, 4 (with 3 in flight).
      const s3 = new FakeS3({ delay: (c) => (c.input.PartNumber === 1 ? 60 : c.input.PartNumber === 3 ? 20 : 5) });
      const data = randomBytes(3 * 5 * MiB + 1234);
      expect(await upload(s3, streamOf(data), { partsInFlight: 3 })).to.deep.equal({ size: data.length });

      const parts = s3.named('UploadPart');
      expect(parts.map((p) => p.input.PartNumber)).to.deep.equal([1, 2, 3, 4]);
      expect(parts.map((p) => p.body!.length)).to.deep.equal([5 * MiB, 5 * MiB, 5 * MiB, 1234]);
      expect(Buffer.concat(parts.map((p) => p.body!)).equals(data)).to.equal(true);
      const [complete] = s3.named('CompleteMultipartUpload');
      expect(complete!.input.MultipartUpload.Parts).to.deep.equal([1, 2, 3, 4].map((n) => ({ PartNumber: n, ETag: `"etag-${n}"` })));
      expect(s3.named('AbortMultipartUpload')).to.deep.equal([]);
    });

    for (const [label, size, commands] of [
      ['empty', 0, ['PutObject']],
      ['one byte short of a part', 5 * MiB - 1, ['PutObject']],
      ['exactly one part', 5 * MiB, ['CreateMultipartUpload', 'UploadPart', 'CompleteMultipartUpload']],
      ['one part and a byte', 5 * MiB + 1, ['CreateMultipartUpload', 'UploadPart', 'UploadPart', 'CompleteMultipartUpload']],
    ] as const) {
      it(`when the body is ${label} (${size} bytes), then the store gets ${commands.join(', ')}`, async () => {
        const s3 = new FakeS3();
        const data = randomBytes(size);
        expect(await upload(s3, streamOf(data))).to.deep.equal({ size });
        expect(s3.calls.map((c) => c.command)).to.deep.equal(commands);
        const stored = Buffer.concat(s3.calls.flatMap((c) => (c.body ? [c.body] : [])));
        expect(stored.equals(data)).to.equal(true);
      });
    }
  });

  describe('buffers and parts in flight', () => {
    for (const partsInFlight of [1, 2, 3]) {
      it(`when ${partsInFlight} part(s) may be in flight, then a 12-part upload holds exactly ${partsInFlight} buffer(s) and sends at most ${partsInFlight} part(s) at once`, async () => {
        const s3 = new FakeS3({ delay: (c) => (c.command === 'UploadPart' ? 10 + (c.input.PartNumber % 3) * 5 : 0) });
        await upload(s3, streamOf(randomBytes(12 * 5 * MiB)), { partsInFlight });
        expect(s3.named('UploadPart')).to.have.length(12);
        expect(s3.partBuffers.size).to.equal(partsInFlight);
        expect(s3.maxInFlight).to.equal(partsInFlight);
      });
    }
  });

  describe('every abort path', () => {
    it('when the body fails after two parts went up, then the upload is aborted, nothing is completed and the body error is what rejects', async () => {
      const s3 = new FakeS3();
      const boom = new Error('client went away');
      const body = failingAfter(11 * MiB, boom);
      expect(await rejection(upload(s3, body))).to.equal(boom);
      expect(s3.named('UploadPart').map((p) => p.input.PartNumber)).to.deep.equal([1, 2]);
      expect(s3.named('AbortMultipartUpload').map((c) => c.input.UploadId)).to.deep.equal(['upload-1']);
      expect(s3.named('CompleteMultipartUpload')).to.deep.equal([]);
      expect(body.destroyed).to.equal(true);
    });

    it('when a part fails mid-way, then no part after it is sent, the upload is aborted and ObjectStoreError names the part', async () => {
      const s3 = new FakeS3({ fail: (c) => (c.command === 'UploadPart' && c.input.PartNumber === 2 ? new Error('503 SlowDown') : undefined) });
      const body = streamOf(randomBytes(8 * 5 * MiB));
      const err = await rejection(upload(s3, body, { partsInFlight: 2 }));
      expect(err).to.be.instanceOf(ObjectStoreError);
      expect(err.message).to.equal('uploading part 2 failed');
      expect(err.cause.message).to.equal('503 SlowDown');
      // Part 3 may have been handed over while part 2 was still in flight; none after.
      expect(Math.max(...s3.named('UploadPart').map((p) => p.input.PartNumber))).to.be.at.most(3);
      expect(s3.named('AbortMultipartUpload')).to.have.length(1);
      expect(s3.named('CompleteMultipartUpload')).to.deep.equal([]);
      expect(body.destroyed).to.equal(true);
    });

    it('when the upload cannot be created, then nothing is aborted (there is no upload) and ObjectStoreError rejects', async () => {
      const s3 = new FakeS3({ fail: (c) => (c.command === 'CreateMultipartUpload' ? new Error('down') : undefined) });
      const err = await rejection(upload(s3, streamOf(randomBytes(6 * MiB))));
      expect(err).to.be.instanceOf(ObjectStoreError);
      expect(err.message).to.equal('starting a multipart upload failed');
      expect(s3.calls.map((c) => c.command)).to.deep.equal(['CreateMultipartUpload']);
    });

    it('when recording the upload id fails, then the created upload is aborted before any part is sent', async () => {
      const s3 = new FakeS3();
      const dbDown = new Error('database unavailable');
      const err = await rejection(upload(s3, streamOf(randomBytes(6 * MiB)), { onMultipartStart: async () => Promise.reject(dbDown) }));
      expect(err).to.equal(dbDown);
      expect(s3.calls.map((c) => c.command)).to.deep.equal(['CreateMultipartUpload', 'AbortMultipartUpload']);
    });

    it('when completing fails, then the upload is aborted and ObjectStoreError rejects', async () => {
      const s3 = new FakeS3({ fail: (c) => (c.command === 'CompleteMultipartUpload' ? new Error('400 EntityTooSmall') : undefined) });
      const err = await rejection(upload(s3, streamOf(randomBytes(11 * MiB))));
      expect(err).to.be.instanceOf(ObjectStoreError);
      expect(err.message).to.equal('completing the multipart upload failed');
      expect(s3.calls.map((c) => c.command).slice(-2)).to.deep.equal(['CompleteMultipartUpload', 'AbortMultipartUpload']);
    });

    it('when the abort fails too, then the original error still rejects', async () => {
      const s3 = new FakeS3({
        fail: (c) => (c.command === 'UploadPart' && c.input.PartNumber === 2 ? new Error('part') : c.command === 'AbortMultipartUpload' ? new Error('abort') : undefined),
      });
      const err = await rejection(upload(s3, streamOf(randomBytes(12 * MiB))));
      expect(err.message).to.equal('uploading part 2 failed');
      expect(s3.named('AbortMultipartUpload')).to.have.length(1);
    });

    it('when a small body cannot be stored, then ObjectStoreError rejects and there is nothing to abort', async () => {
      const s3 = new FakeS3({ fail: (c) => (c.command === 'PutObject' ? new Error('down') : undefined) });
      const err = await rejection(upload(s3, streamOf(randomBytes(1000))));
      expect(err).to.be.instanceOf(ObjectStoreError);
      expect(s3.calls.map((c) => c.command)).to.deep.equal(['PutObject']);
    });
  });

  describe('limits', () => {
    it('when a body needs more than 10,000 parts, then ObjectTooLargeError rejects before part 10,001 and the upload is aborted', async () => {
      const s3 = new FakeS3();
      const partSize = KiB;
      const limit = S3_LIMITS.maxParts * partSize;
      const err = await rejection(upload(s3, streamOf(Buffer.alloc(limit + 1), KiB), { partSize, partsInFlight: 16 }));
      expect(err).to.be.instanceOf(ObjectTooLargeError);
      expect(err.limit).to.equal(limit);
      expect(s3.named('UploadPart')).to.have.length(S3_LIMITS.maxParts);
      expect(s3.named('AbortMultipartUpload')).to.have.length(1);
      expect(s3.named('CompleteMultipartUpload')).to.deep.equal([]);
    });

    it('when a body fills exactly 10,000 parts, then it is stored', async () => {
      const s3 = new FakeS3();
      const limit = S3_LIMITS.maxParts * KiB;
      expect(await upload(s3, streamOf(Buffer.alloc(limit), 8 * KiB), { partSize: KiB, partsInFlight: 16 })).to.deep.equal({ size: limit });
      expect(s3.named('CompleteMultipartUpload')[0]!.input.MultipartUpload.Parts).to.have.length(S3_LIMITS.maxParts);
    });

    it('when the part size is over 5 GiB, then the upload is refused before any request and the body is released', async () => {
      const s3 = new FakeS3();
      const body = streamOf(Buffer.alloc(10));
      expect(await rejection(upload(s3, body, { partSize: S3_LIMITS.maxPartSize + 1 }))).to.be.instanceOf(RangeError);
      expect(s3.calls).to.deep.equal([]);
      expect(body.destroyed).to.equal(true);
    });
  });
});

describe('appendS3Resumable (fake S3 client)', () => {
  for (const partsInFlight of [1, 2, 3]) {
    it(`when ${partsInFlight} part(s) may be in flight, then a 12-part PATCH holds exactly ${partsInFlight} buffer(s), as a plain upload does`, async () => {
      const s3 = new FakeS3({ delay: (c) => (c.command === 'UploadPart' ? 10 + (c.input.PartNumber % 3) * 5 : 0) });
      const data = randomBytes(12 * 5 * MiB);
      const result = await appendS3Resumable({ client: s3.client, bucket: 'b', partsInFlight }, 'k', startS3Resumable(5 * MiB), streamOf(data), {
        offset: 0,
        length: data.length,
      });
      expect(result.offset).to.equal(data.length);
      expect(s3.named('UploadPart')).to.have.length(12);
      expect(s3.partBuffers.size).to.equal(partsInFlight);
      expect(s3.maxInFlight).to.equal(partsInFlight);
    });
  }
});

describe('SharedPartBuffers (fake S3 client)', () => {
  const slowParts = () => new FakeS3({ delay: (c) => (c.command === 'UploadPart' ? 10 + (c.input.PartNumber % 3) * 5 : 0) });
  /** The stored object of `key`: its parts' bodies in part order. */
  const stored = (s3: FakeS3, key: string) =>
    Buffer.concat(
      s3
        .named('UploadPart')
        .filter((c) => c.input.Key === key)
        .sort((a, b) => a.input.PartNumber - b.input.PartNumber)
        .map((c) => c.body!),
    );

  it('when one upload runs, then it sends 2 parts at once with a lent buffer, and gives it back at the end', async () => {
    const s3 = slowParts();
    const shared = new SharedPartBuffers(5 * MiB, 1);
    await upload(s3, streamOf(randomBytes(12 * 5 * MiB)), { partsInFlight: 2, shared });
    expect(s3.maxInFlight).to.equal(2);
    expect(s3.partBuffers.size).to.equal(2);
    expect(shared.inUse).to.equal(0);
  });

  it('when four uploads run at once with one shared buffer, then they hold 5 buffers in all (not 8) and every object is intact', async () => {
    const s3 = slowParts();
    const shared = new SharedPartBuffers(5 * MiB, 1);
    const bodies = [0, 1, 2, 3].map(() => randomBytes(6 * 5 * MiB + 77));
    await Promise.all(bodies.map((data, i) => upload(s3, streamOf(data), { partsInFlight: 2, shared, key: `k${i}` })));
    expect(s3.partBuffers.size).to.equal(5);
    expect(s3.maxInFlight).to.be.at.most(5);
    bodies.forEach((data, i) => expect(stored(s3, `k${i}`).equals(data), `object k${i}`).to.equal(true));
    expect(shared.inUse).to.equal(0);
  });

  it('when the pool has no buffers, then each upload sends one part at a time with its own buffer', async () => {
    const s3 = slowParts();
    await upload(s3, streamOf(randomBytes(12 * 5 * MiB)), { partsInFlight: 2, shared: new SharedPartBuffers(5 * MiB, 0) });
    expect(s3.maxInFlight).to.equal(1);
    expect(s3.partBuffers.size).to.equal(1);
  });

  it('when an upload has another part size, then it borrows nothing and sends one part at a time', async () => {
    const s3 = slowParts();
    const shared = new SharedPartBuffers(5 * MiB, 4);
    await upload(s3, streamOf(randomBytes(6 * 6 * MiB)), { partSize: 6 * MiB, partsInFlight: 2, shared });
    expect(s3.maxInFlight).to.equal(1);
    expect(shared.inUse).to.equal(0);
  });

  it('when a part fails or the body fails, then the lent buffer comes back and the next upload sends 2 parts at once again', async () => {
    const shared = new SharedPartBuffers(5 * MiB, 1);
    const failing = new FakeS3({ delay: () => 5, fail: (c) => (c.command === 'UploadPart' && c.input.PartNumber === 3 ? new Error('503') : undefined) });
    expect(await rejection(upload(failing, streamOf(randomBytes(8 * 5 * MiB)), { shared }))).to.be.instanceOf(ObjectStoreError);
    expect(shared.inUse).to.equal(0);
    const gone = new Error('client went away');
    expect(await rejection(upload(slowParts(), failingAfter(17 * MiB, gone), { shared }))).to.equal(gone);
    expect(shared.inUse).to.equal(0);
    const s3 = slowParts();
    await upload(s3, streamOf(randomBytes(8 * 5 * MiB)), { shared });
    expect(s3.maxInFlight).to.equal(2);
  });

  it('when the client stalls while a lent buffer is being filled, then it goes back once the upload\'s own part is stored, and the object is intact', async () => {
    // Part 1 takes 300 ms to store: time enough to see the lent buffer in use on a busy machine (CI once
    // saw it back already after a fixed 20 ms wait with 50 ms parts, the event loop being late).
    const s3 = new FakeS3({ delay: (c) => (c.command === 'UploadPart' ? 300 : 0) });
    const shared = new SharedPartBuffers(5 * MiB, 1);
    const body = new PassThrough();
    const data = randomBytes(11 * MiB);
    const done = upload(s3, body, { partsInFlight: 2, shared });
    /** Polls `shared.inUse` until it is `value` or `ms` have passed; returns what it last saw. */
    const inUseBecomes = async (value: number, ms: number) => {
      for (const until = Date.now() + ms; shared.inUse !== value && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 5));
      return shared.inUse;
    };
    // Part 1 goes out; the next megabyte goes into the lent buffer; then the client goes quiet.
    body.write(data.subarray(0, 6 * MiB));
    expect(await inUseBecomes(1, 250), 'lent while part 1 is on its way').to.equal(1);
    expect(s3.calls.filter((c) => c.command === 'UploadPart').length, 'part 1 only').to.equal(1);
    expect(await inUseBecomes(0, 3000), 'given back while the client is quiet').to.equal(0);
    body.end(data.subarray(6 * MiB));
    await done;
    expect(stored(s3, 'k').equals(data)).to.equal(true);
    expect(shared.inUse).to.equal(0);
  });

  it('when a PATCH ends in a tail, then the tail is stored whole from whichever buffer held it, and the lent buffer comes back', async () => {
    const s3 = slowParts();
    const shared = new SharedPartBuffers(5 * MiB, 1);
    const data = randomBytes(7 * 5 * MiB + 1000);
    const result = await appendS3Resumable({ client: s3.client, bucket: 'b', partsInFlight: 2, shared }, 'k', startS3Resumable(5 * MiB), streamOf(data), {
      offset: 0,
      length: data.length + 5,
    });
    expect(result.offset).to.equal(data.length);
    const tail = s3.named('PutObject')[0]!.body!;
    expect(Buffer.concat([stored(s3, 'k'), tail]).equals(data)).to.equal(true);
    expect(s3.maxInFlight).to.equal(2);
    expect(shared.inUse).to.equal(0);
  });

  it('when nothing has been lent for the idle time, then the free buffers are dropped; before it, they are reused', async () => {
    const shared = new SharedPartBuffers(1024, 2, 50);
    const first = shared.take(1024)!;
    shared.give(first);
    expect(shared.take(1024)).to.equal(first);
    const second = shared.take(1024)!;
    expect(second).to.not.equal(first);
    expect(shared.take(1024), 'all lent').to.equal(undefined);
    shared.give(first);
    shared.give(second);
    expect(shared.inUse).to.equal(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const fresh = shared.take(1024)!;
    expect(fresh).to.not.equal(first);
    expect(fresh).to.not.equal(second);
  });
});

describe('S3ObjectStore.partSizeFor', () => {
  const store = (partSize: number) =>
    new S3ObjectStore({ bucket: 'b', region: 'us-east-1', forcePathStyle: true, partSize, partsInFlight: 2, credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });
  const TiB = 1024 * 1024 * MiB;

  it('when no size or a small one is given, then the configured part size is used', () => {
    expect(store(8 * MiB).partSizeFor()).to.equal(8 * MiB);
    expect(store(8 * MiB).partSizeFor(1000)).to.equal(8 * MiB);
    expect(store(8 * MiB).partSizeFor(10_000 * 8 * MiB)).to.equal(8 * MiB);
  });

  it('when the size needs more than 10,000 parts of the configured size, then parts grow to the smallest size that fits', () => {
    expect(store(8 * MiB).partSizeFor(10_000 * 8 * MiB + 1)).to.equal(8 * MiB + 1);
    expect(store(8 * MiB).partSizeFor(TiB)).to.equal(Math.ceil(TiB / 10_000));
    const part = store(8 * MiB).partSizeFor(5 * TiB);
    expect(part).to.equal(549_755_814);
    // What it returned is the smallest size whose 10,000 parts hold 5 TiB.
    expect(part * 10_000).to.be.at.least(5 * TiB);
    expect((part - 1) * 10_000).to.be.below(5 * TiB);
  });

  it('when the size is over what S3 holds (5 TiB), then parts stay those of 5 TiB, far under S3\'s 5 GiB', () => {
    expect(store(8 * MiB).partSizeFor(40 * TiB)).to.equal(549_755_814);
    expect(store(8 * MiB).partSizeFor(Number.MAX_SAFE_INTEGER)).to.equal(549_755_814);
  });

  it('when the configured part size is the largest S3 allows, then it is used as is', () => {
    expect(store(S3_LIMITS.maxPartSize).partSizeFor(5 * TiB)).to.equal(S3_LIMITS.maxPartSize);
  });

  it('when the store is asked its ceiling, then it is S3\'s 5 TiB', () => {
    expect(store(8 * MiB).maxObjectSize).to.equal(5 * TiB);
  });
});
