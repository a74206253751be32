import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { ObjectNotFoundError, type ObjectStore } from '../../src/storage/object-store.js';

const MiB = 1024 * 1024;

/**
 * Behaviour every ObjectStore must share. Each implementation's test file calls
 * this once; `makeStore` gives every test a fresh, empty store.
 */
export function objectStoreContract(
  name: string,
  makeStore: () => Promise<{ store: ObjectStore; cleanup(): Promise<void> }>,
): void {
  describe(`ObjectStore contract: ${name}`, function () {
    // Remote stores (S3) need more than mocha's default 2 s for a few MiB.
    this.timeout(60_000);

    let store: ObjectStore;
    let cleanup: (() => Promise<void>) | undefined;

    beforeEach(async () => {
      ({ store, cleanup } = await makeStore());
    });

    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    it('when an object is put, then get returns identical bytes', async () => {
      const key = newKey();
      const body = randomBody(3 * MiB + 17);
      await store.put(key, body.stream);
      expect(await sha256(await store.get(key))).to.equal(body.sha256());
    });

    it('when an object is put, then put resolves with its exact size', async () => {
      const size = 2 * MiB + 5;
      expect(await store.put(newKey(), randomBody(size).stream)).to.deep.equal({ size });
    });

    it('when an empty object is put, then it has size 0 and reads back empty', async () => {
      const key = newKey();
      expect(await store.put(key, Readable.from([]))).to.deep.equal({ size: 0 });
      expect(await store.head(key)).to.deep.equal({ size: 0 });
      expect((await readAll(await store.get(key))).length).to.equal(0);
    });

    describe('ranged get', () => {
      const bytes = randomBytes(64 * 1024 + 3);
      let key: string;

      beforeEach(async () => {
        key = newKey();
        await store.put(key, Readable.from(chunks(bytes, 1000)));
      });

      for (const [label, start, end] of [
        ['the first byte', 0, 0],
        ['a middle range', 1000, 40_999],
        ['the last byte', bytes.length - 1, bytes.length - 1],
      ] as const) {
        it(`when ${label} is requested, then exactly bytes start..end inclusive are returned`, async () => {
          const got = await readAll(await store.get(key, { start, end }));
          expect(got.length).to.equal(end - start + 1);
          expect(got.equals(bytes.subarray(start, end + 1))).to.equal(true);
        });
      }
    });

    it('when an object exists, then head returns its size', async () => {
      const key = newKey();
      await store.put(key, Readable.from([randomBytes(12_345)]));
      expect(await store.head(key)).to.deep.equal({ size: 12_345 });
    });

    it('when a key is missing, then head returns undefined', async () => {
      expect(await store.head(newKey())).to.equal(undefined);
    });

    it('when a key is missing, then get rejects with ObjectNotFoundError', async () => {
      const key = newKey();
      const err = await rejection(store.get(key));
      expect(err).to.be.instanceOf(ObjectNotFoundError);
      expect((err as ObjectNotFoundError).key).to.equal(key);
    });

    it('when an object is deleted, then head returns undefined and get rejects', async () => {
      const key = newKey();
      const other = newKey();
      await store.put(key, Readable.from([randomBytes(100)]));
      await store.put(other, Readable.from([randomBytes(100)]));
      await store.delete(key);
      expect(await store.head(key)).to.equal(undefined);
      expect(await rejection(store.get(key))).to.be.instanceOf(ObjectNotFoundError);
      // Only that object goes.
      expect(await store.head(other)).to.deep.equal({ size: 100 });
    });

    it('when a missing key is deleted, then delete resolves', async () => {
      expect(await store.delete(newKey())).to.equal(undefined);
    });

    it('when the body errors midway, then put rejects with that error and leaves no object', async () => {
      const key = newKey();
      const boom = new Error('boom');
      expect(await rejection(store.put(key, failingBody(boom)))).to.equal(boom);
      expect(await store.head(key)).to.equal(undefined);
      expect(await rejection(store.get(key))).to.be.instanceOf(ObjectNotFoundError);
    });

    it('when the body is destroyed midway without an error, then put rejects and leaves no object', async () => {
      const key = newKey();
      expect(await rejection(store.put(key, failingBody()))).to.be.instanceOf(Error);
      expect(await store.head(key)).to.equal(undefined);
    });

    it('when two puts to different keys run concurrently, then both round-trip', async () => {
      const [a, b] = [newKey(), newKey()];
      const [bodyA, bodyB] = [randomBody(MiB + 1), randomBody(MiB + 2)];
      expect(await Promise.all([store.put(a, bodyA.stream), store.put(b, bodyB.stream)])).to.deep.equal([
        { size: MiB + 1 },
        { size: MiB + 2 },
      ]);
      expect(await sha256(await store.get(a))).to.equal(bodyA.sha256());
      expect(await sha256(await store.get(b))).to.equal(bodyB.sha256());
    });
  });
}

/** A server-style key: two hex characters of fan-out, then the rest. */
function newKey(): string {
  const hex = randomBytes(16).toString('hex');
  return `${hex.slice(0, 2)}/${hex.slice(2)}`;
}

/**
 * `size` random bytes produced chunk by chunk (never all in memory), in uneven
 * chunks so no store can pass by assuming aligned writes. `sha256()` is valid
 * once the stream has been consumed.
 */
function randomBody(size: number): { stream: Readable; sha256(): string } {
  const hash = createHash('sha256');
  async function* generate() {
    for (let left = size; left > 0; ) {
      const chunk = randomBytes(Math.min(left, 50_000 + Math.floor(Math.random() * 100_000)));
      hash.update(chunk);
      left -= chunk.length;
      yield chunk;
    }
  }
  return { stream: Readable.from(generate()), sha256: () => hash.digest('hex') };
}

/** Emits some data, then is destroyed with `err` (or with none). */
function failingBody(err?: Error): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent++ < 3) this.push(randomBytes(64 * 1024));
      else this.destroy(err);
    },
  });
}

function* chunks(bytes: Buffer, size: number): Generator<Buffer> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

async function sha256(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const part of stream) hash.update(part as Buffer);
  return hash.digest('hex');
}

/** The promise's rejection reason; fails the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  expect.fail('expected a rejection, but the promise resolved');
}
