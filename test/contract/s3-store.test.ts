import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { eventually } from '../helpers/raw-upload.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { objectStoreContract } from './object-store.contract.js';

const MiB = 1024 * 1024;
let s3: TestS3;
let buckets = 0;

async function newStore(options: { partSize?: number } = {}) {
  const store = new S3ObjectStore(s3.storeOptions(s3.bucket(`contract-${++buckets}`), options));
  await store.ensureBucket();
  return store;
}

describe('S3ObjectStore', () => {
  before(async () => {
    s3 = await startTestS3();
  });
  after(async () => {
    await s3.close();
  });

  objectStoreContract(`s3 (${process.env.TEST_S3_ENDPOINT ? 'TEST_S3_ENDPOINT' : 's3rver'})`, async () => {
    const store = await newStore();
    return { store, cleanup: () => store.close() };
  });

  it('when a body spans several parts, then it round-trips and no multipart upload stays open', async () => {
    const store = await newStore();
    const data = randomBytes(12 * MiB + 123);
    const info = await store.put('multi/part', Readable.from([data.subarray(0, 7 * MiB), data.subarray(7 * MiB)]));
    expect(info.size).to.equal(data.length);
    const chunks: Buffer[] = [];
    for await (const chunk of await store.get('multi/part')) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(data)).to.equal(true);
    expect(await allOpenUploads(store)).to.deep.equal([]);
    await store.close();
  });

  it('when a multipart body fails after some parts, then the upload is aborted and nothing remains', async () => {
    const store = await newStore();
    const body = new Readable({ read() {} });
    // Parts the store has acknowledged: the failure must come after some.
    let partsStored = 0;
    store.client.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (context.commandName === 'UploadPartCommand') partsStored += 1;
        return result;
      },
      { step: 'initialize' },
    );
    const putting = store.put('broken/multi', body);
    body.push(randomBytes(11 * MiB));
    // 11 MiB in 5 MiB parts: two are sent, the third waits for more bytes.
    expect(await eventually(async () => partsStored, (n) => n >= 2)).to.equal(2);
    body.destroy(new Error('client went away'));
    let error: unknown;
    await putting.catch((err: unknown) => (error = err));
    expect((error as Error).message).to.equal('client went away');
    expect(await store.head('broken/multi')).to.equal(undefined);
    expect(await allOpenUploads(store)).to.deep.equal([]);
    await store.close();
  });

  it('when a resumable upload is continued by another store instance, then it completes, and no upload or tail object is left', async () => {
    const bucket = s3.bucket('resume');
    const first = new S3ObjectStore(s3.storeOptions(bucket));
    await first.ensureBucket();
    const second = new S3ObjectStore(s3.storeOptions(bucket));
    const data = randomBytes(8 * MiB + 11);
    const state = await first.startResumable('resume/me', { maxSize: data.length });
    const a = await first.appendResumable('resume/me', state, Readable.from([data.subarray(0, 3 * MiB)]), { offset: 0, length: data.length });
    const b = await second.appendResumable('resume/me', JSON.parse(JSON.stringify(a.state)), Readable.from([data.subarray(a.offset)]), { offset: a.offset, length: data.length });
    await second.completeResumable('resume/me', b.state, b.offset);
    const chunks: Buffer[] = [];
    for await (const chunk of await first.get('resume/me')) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(data)).to.equal(true);
    expect(await allOpenUploads(first)).to.deep.equal([]);
    expect(await first.head('resume/me.tail0')).to.equal(undefined);
    expect(await first.head('resume/me.tail1')).to.equal(undefined);
    await Promise.all([first.close(), second.close()]);
  });

  it('when a resumable upload keeps a tail, then listObjects names the upload as the tail\'s owner', async () => {
    const store = await newStore();
    const state = await store.startResumable('ab/tailed', { maxSize: 100 * MiB });
    await store.appendResumable('ab/tailed', state, Readable.from([randomBytes(1000)]), { offset: 0 });
    const { objects } = await store.listObjects({ limit: 10 });
    expect(objects.map(({ key, owner }) => ({ key, owner }))).to.deep.equal([{ key: 'ab/tailed.tail0', owner: 'ab/tailed' }]);
    await store.discardResumable('ab/tailed', state);
    await store.close();
  });

  it('when a resumable upload is discarded, then its multipart upload is aborted and its tail removed', async () => {
    const store = await newStore();
    const data = randomBytes(6 * MiB);
    const state = await store.startResumable('drop/me', { maxSize: 100 * MiB });
    const a = await store.appendResumable('drop/me', state, Readable.from([data]), { offset: 0 });
    expect(await allOpenUploads(store)).to.have.length(1);
    expect(await store.head('drop/me.tail0')).to.deep.equal({ size: MiB });
    await store.discardResumable('drop/me', a.state);
    expect(await allOpenUploads(store)).to.deep.equal([]);
    expect(await store.head('drop/me.tail0')).to.equal(undefined);
    await store.close();
  });

  it('when the part size is asked for a large limit, then 10,000 parts always suffice', async () => {
    const store = await newStore({ partSize: 8 * MiB });
    expect(store.partSizeFor(1000)).to.equal(8 * MiB);
    expect(store.partSizeFor(10 * 1024 * MiB)).to.equal(8 * MiB);
    const huge = 200 * 1024 * MiB;
    expect(store.partSizeFor(huge) * 10_000).to.be.at.least(huge);
    await store.close();
  });

  it('when the bucket cannot be reached, then ensureBucket fails with a message naming it', async () => {
    const store = new S3ObjectStore(s3.storeOptions('unreachable', { endpoint: 'http://127.0.0.1:1' }));
    let error: unknown;
    await store.ensureBucket().catch((err: unknown) => (error = err));
    expect((error as Error).message).to.match(/unreachable at http:\/\/127\.0\.0\.1:1/);
    await store.close();
  });
});
