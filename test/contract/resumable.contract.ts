import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ObjectNotFoundError, type ObjectStore, type OpenUpload } from '../../src/storage/object-store.js';
import type { ResumableState } from '../../src/storage/resumable.js';

const MiB = 1024 * 1024;

/** Yields `bytes` in uneven chunks; with `failAfter`, throws `error` once that many bytes were yielded. */
async function* body(bytes: Buffer, options: { failAfter?: number; error?: Error } = {}): AsyncGenerator<Buffer> {
  const end = options.failAfter ?? bytes.length;
  for (let at = 0; at < end; ) {
    const size = Math.min(end - at, 40_000 + Math.floor(Math.random() * 90_000));
    yield bytes.subarray(at, at + size);
    at += size;
  }
  if (options.failAfter !== undefined) throw options.error ?? new Error('connection cut');
}

/** What the caller keeps between requests: the state as JSON, as the database holds it. */
const saved = (state: ResumableState): ResumableState => JSON.parse(JSON.stringify(state));

async function readAll(store: ObjectStore, key: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of await store.get(key)) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

async function allOpen(store: ObjectStore): Promise<OpenUpload[]> {
  const all: OpenUpload[] = [];
  for await (const page of store.openUploads()) all.push(...page);
  return all;
}

function newKey(): string {
  const hex = randomBytes(16).toString('hex');
  return `${hex.slice(0, 2)}/${hex.slice(2)}`;
}

/**
 * The resumable half of the ObjectStore contract (src/storage/resumable.ts),
 * run by objectStoreContract for every store. Sizes cross the S3 tests' 5 MiB
 * parts in every way: appends within a part, across parts, ending on a part
 * boundary, and with a short last part.
 */
export function resumableContract(getStore: () => ObjectStore): void {
  describe('resumable uploads', () => {
    let store: ObjectStore;
    beforeEach(() => {
      store = getStore();
    });

    /** Appends `pieces` of `data` one after another, each from the saved state of the one before. */
    async function appendAll(key: string, data: Buffer, pieces: number[], length?: number) {
      let state = saved(await store.startResumable(key, { maxSize: data.length }));
      let offset = 0;
      for (const size of pieces) {
        const result = await store.appendResumable(key, state, body(data.subarray(offset, offset + size)), { offset, length });
        expect(result.interrupted).to.equal(undefined);
        expect(result.offset).to.equal(offset + size);
        ({ offset } = result);
        state = saved(result.state);
      }
      return { state, offset };
    }

    for (const [label, pieces] of [
      ['one append', [12 * MiB + 7]],
      ['appends within, across and on part boundaries', [1, 3 * MiB, 2 * MiB - 1, 6 * MiB, 3]],
      ['many small appends', Array.from({ length: 9 }, () => 700_001)],
    ] as const) {
      it(`when an upload is written in ${label} and completed, then get returns identical bytes`, async () => {
        const data = randomBytes(pieces.reduce((a, b) => a + b, 0));
        const key = newKey();
        const { state, offset } = await appendAll(key, data, [...pieces], data.length);
        expect(await store.head(key), 'not visible before completion').to.equal(undefined);
        await store.completeResumable(key, state, offset);
        expect(await store.head(key)).to.deep.equal({ size: data.length });
        expect((await readAll(store, key)).equals(data)).to.equal(true);
      });
    }

    it('when the length is only known at the last append (deferred), then the object is complete', async () => {
      const data = randomBytes(11 * MiB + 5);
      const key = newKey();
      let state = saved(await store.startResumable(key, { maxSize: 100 * MiB }));
      const first = await store.appendResumable(key, state, body(data.subarray(0, 6 * MiB + 1)), { offset: 0 });
      state = saved(first.state);
      const last = await store.appendResumable(key, state, body(data.subarray(first.offset)), { offset: first.offset, length: data.length });
      await store.completeResumable(key, saved(last.state), last.offset);
      expect((await readAll(store, key)).equals(data)).to.equal(true);
    });

    it('when a deferred length is declared by an empty last append (the data ended on an earlier append), then the object is complete', async () => {
      // 6 MiB + 1 with S3's 5 MiB parts: one part stored and a tail of 1 MiB + 1.
      const data = randomBytes(6 * MiB + 1);
      const key = newKey();
      const first = await store.appendResumable(key, saved(await store.startResumable(key, { maxSize: 100 * MiB })), body(data), { offset: 0 });
      const last = await store.appendResumable(key, saved(first.state), body(Buffer.alloc(0)), { offset: first.offset, length: data.length });
      expect(last.offset).to.equal(data.length);
      await store.completeResumable(key, saved(last.state), last.offset);
      expect((await readAll(store, key)).equals(data)).to.equal(true);
    });

    it('when an append brings no bytes and ends nothing, then the state it returns is the one it was given', async () => {
      const data = randomBytes(6 * MiB + 1);
      const key = newKey();
      const first = await appendAll(key, data, [data.length]);
      const empty = await store.appendResumable(key, first.state, body(Buffer.alloc(0)), { offset: first.offset });
      expect(empty.offset).to.equal(first.offset);
      expect(saved(empty.state)).to.deep.equal(first.state);
    });

    it('when the body fails midway, then everything it delivered is stored and the next append continues there', async () => {
      const data = randomBytes(13 * MiB);
      const key = newKey();
      const state = saved(await store.startResumable(key, { maxSize: data.length }));
      const cut = new Error('connection cut');
      const first = await store.appendResumable(key, state, body(data, { failAfter: 7 * MiB + 3, error: cut }), { offset: 0, length: data.length });
      expect(first.interrupted).to.equal(cut);
      expect(first.offset).to.equal(7 * MiB + 3);
      const rest = await store.appendResumable(key, saved(first.state), body(data.subarray(first.offset)), { offset: first.offset, length: data.length });
      expect(rest.offset).to.equal(data.length);
      await store.completeResumable(key, saved(rest.state), rest.offset);
      expect((await readAll(store, key)).equals(data)).to.equal(true);
    });

    it('when an append is never saved, then the next append from the saved state writes over it', async () => {
      const data = randomBytes(9 * MiB);
      const junk = randomBytes(8 * MiB);
      const key = newKey();
      const first = await appendAll(key, data, [2 * MiB + 9], data.length);
      // Written, but its state is dropped (a lost lease, a failed checksum).
      await store.appendResumable(key, first.state, body(junk), { offset: first.offset, length: data.length });
      const rest = await store.appendResumable(key, first.state, body(data.subarray(first.offset)), { offset: first.offset, length: data.length });
      await store.completeResumable(key, saved(rest.state), rest.offset);
      expect((await readAll(store, key)).equals(data)).to.equal(true);
    });

    it('when completion is repeated, then it succeeds and the object stays', async () => {
      for (const size of [6 * MiB + 1, 1000]) {
        const data = randomBytes(size);
        const key = newKey();
        const { state, offset } = await appendAll(key, data, [size], size);
        await store.completeResumable(key, state, offset);
        await store.completeResumable(key, state, offset);
        expect((await readAll(store, key)).equals(data)).to.equal(true);
      }
    });

    it('when an upload of zero bytes is completed, then the object is empty', async () => {
      const key = newKey();
      const state = await store.startResumable(key, { maxSize: 0 });
      await store.completeResumable(key, saved(state), 0);
      expect(await store.head(key)).to.deep.equal({ size: 0 });
    });

    it('when an upload has stored a part, then openUploads lists it under the uploadId of its state (what a record claims it by), until it is completed', async () => {
      const data = randomBytes(6 * MiB + 5);
      const key = newKey();
      const { state, offset } = await appendAll(key, data, [6 * MiB], data.length);
      expect(state.uploadId).to.be.a('string');
      const listed = (await allOpen(store)).filter((u) => u.uploadId === state.uploadId);
      expect(listed).to.have.length(1);
      if (listed[0]!.key !== undefined) expect(listed[0]!.key).to.equal(key);
      const rest = await store.appendResumable(key, state, body(data.subarray(offset)), { offset, length: data.length });
      await store.completeResumable(key, saved(rest.state), rest.offset);
      expect((await allOpen(store)).filter((u) => u.uploadId === state.uploadId)).to.deep.equal([]);
    });

    it('when an upload is discarded, before or after completion, then nothing of it can be read and discarding again is fine', async () => {
      const data = randomBytes(7 * MiB);
      const openKey = newKey();
      const open = await appendAll(openKey, data, [6 * MiB + 2]);
      const doneKey = newKey();
      const done = await appendAll(doneKey, data, [data.length], data.length);
      await store.completeResumable(doneKey, done.state, done.offset);
      for (const [key, state] of [[openKey, open.state], [doneKey, done.state]] as const) {
        await store.discardResumable(key, state);
        await store.discardResumable(key, state);
        expect(await store.head(key)).to.equal(undefined);
        expect(await store.get(key).catch((err: unknown) => err)).to.be.instanceOf(ObjectNotFoundError);
      }
      // Nothing is left to continue from either.
      const err = await store.appendResumable(openKey, open.state, body(data.subarray(open.offset)), { offset: open.offset }).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(Error);
    });
  });
}
