import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { ObjectNotFoundError, type ObjectStore, type OpenUpload } from '../../src/storage/object-store.js';
import { resumableContract } from './resumable.contract.js';

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

    describe('open uploads', () => {
      it('when puts are under way, then openUploads lists each, page by page, with the id onStarted gave and a start time', async () => {
        const before = Date.now() - 2000; // store clocks may differ a little
        const puts = await Promise.all([startedPut(store), startedPut(store), startedPut(store)]);
        const pages: OpenUpload[][] = [];
        for await (const page of store.openUploads({ pageSize: 2 })) pages.push(page);
        expect(pages.map((p) => p.length)).to.deep.equal([2, 1]);
        const listed = pages.flat();
        expect(listed.map((u) => u.uploadId).sort()).to.deep.equal(puts.map((p) => p.uploadId).sort());
        for (const upload of listed) {
          const put = puts.find((p) => p.uploadId === upload.uploadId)!;
          if (upload.key !== undefined) expect(upload.key).to.equal(put.key);
          expect(upload.since.getTime()).to.be.within(before, Date.now() + 2000);
        }
        await Promise.all(puts.map((p) => p.finish()));
        expect(await allOpen(store)).to.deep.equal([]);
      });

      it('when an open upload is aborted, then its put fails, nothing is listed and no object appears', async () => {
        const put = await startedPut(store);
        const [open] = await allOpen(store);
        await store.abortUpload(open!);
        expect(await allOpen(store)).to.deep.equal([]);
        expect(await rejection(put.finish())).to.be.instanceOf(Error);
        expect(await store.head(put.key)).to.equal(undefined);
      });

      it('when an upload that is gone is aborted, then abortUpload resolves and leaves objects alone', async () => {
        const put = await startedPut(store);
        const [open] = await allOpen(store);
        await put.finish();
        expect(await store.abortUpload(open!)).to.equal(undefined);
        expect(await store.head(put.key)).to.deep.equal({ size: put.size });
      });

      it('when nothing is under way, then openUploads yields no page', async () => {
        expect(await allOpen(store)).to.deep.equal([]);
      });
    });

    describe('listing objects', () => {
      const put = (key: string, bytes = 3) => store.put(key, Readable.from([randomBytes(bytes)]));
      const all = async (limit: number) => {
        const pages: string[][] = [];
        let after: string | undefined;
        do {
          const page = await store.listObjects({ after, limit });
          pages.push(page.objects.map((o) => o.key));
          after = page.next;
        } while (after !== undefined && pages.length < 20);
        return pages;
      };

      it('when objects exist, then listObjects gives them in key order, a page of at most `limit` at a time, each continuing after the last', async () => {
        const keys = ['0a/one', '0a/two', '5f/three', 'e1/four', 'e1/five'];
        for (const key of keys) await put(key);
        const pages = await all(2);
        expect(pages.flat()).to.deep.equal([...keys].sort());
        for (const page of pages) expect(page.length).to.be.at.most(2);
        expect(pages.slice(0, -1).every((page) => page.length === 2)).to.equal(true);
      });

      it('when listing, then each object has its size, its own key as owner and a time around its write', async () => {
        const before = Date.now() - 5000; // store clocks may differ a little; S3 keeps whole seconds
        await put('7c/sized', 1234);
        const { objects, next } = await store.listObjects({ limit: 10 });
        expect(next).to.equal(undefined);
        expect(objects.map(({ key, owner, size }) => ({ key, owner, size }))).to.deep.equal([{ key: '7c/sized', owner: '7c/sized', size: 1234 }]);
        expect(objects[0]!.modified.getTime()).to.be.within(before, Date.now() + 5000);
      });

      it('when `after` is given, then only keys after it are listed, whether or not it names an object', async () => {
        for (const key of ['1b/a', '1b/b', '2c/a']) await put(key);
        expect((await store.listObjects({ after: '1b/a', limit: 10 })).objects.map((o) => o.key)).to.deep.equal(['1b/b', '2c/a']);
        expect((await store.listObjects({ after: '1b/zz', limit: 10 })).objects.map((o) => o.key)).to.deep.equal(['2c/a']);
        expect((await store.listObjects({ after: '2c/a', limit: 10 })).objects).to.deep.equal([]);
      });

      it('when an upload is under way, then it is not an object and is not listed', async () => {
        const running = await startedPut(store);
        expect((await store.listObjects({ limit: 10 })).objects).to.deep.equal([]);
        await running.finish();
        expect((await store.listObjects({ limit: 10 })).objects.map((o) => o.key)).to.deep.equal([running.key]);
      });

      it('when the store holds nothing, then the listing is empty and has no next page', async () => {
        expect(await store.listObjects({ limit: 10 })).to.deep.equal({ objects: [] });
      });
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

    resumableContract(() => store);
  });
}

async function allOpen(store: ObjectStore): Promise<OpenUpload[]> {
  const all: OpenUpload[] = [];
  for await (const page of store.openUploads()) all.push(...page);
  return all;
}

/**
 * A put that has started its upload in the store (onStarted was called:
 * for S3 that takes one full part, 5 MiB, of the body) and waits for more.
 * finish() sends the last byte and resolves or rejects as the put does.
 */
async function startedPut(store: ObjectStore): Promise<{ key: string; uploadId: string; size: number; finish(): Promise<unknown> }> {
  const key = newKey();
  const body = new Readable({ read() {} });
  let started!: (uploadId: string) => void;
  const uploadId = new Promise<string>((resolve) => (started = resolve));
  const putting = store.put(key, body, { onStarted: (id) => started(id) });
  putting.catch(() => {}); // handled by finish()
  const first = randomBytes(5 * MiB + 1);
  body.push(first);
  const id = await Promise.race([uploadId, putting.then(() => expect.fail('the put ended before it started an upload'))]);
  // onStarted may come before the store has anything (the local store names
  // its temp file first); once the body is read, the upload exists.
  for (let waited = 0; body.readableLength > 0 && waited < 5000; waited += 10) await new Promise((r) => setTimeout(r, 10));
  return {
    key,
    uploadId: id as string,
    size: first.length + 1,
    finish() {
      body.push(Buffer.from('x'));
      body.push(null);
      return putting;
    },
  };
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
