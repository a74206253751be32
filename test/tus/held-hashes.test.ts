// The running hashes an instance holds between PATCHes (src/tus/held-hashes.ts):
// what a request gets is a copy, only the row's token and byte count get
// one, and the map stays within its count and age.
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import type { Caller } from '../../src/accounts/service.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { HeldHashes } from '../../src/tus/held-hashes.js';
import { testDatabase, type TestDatabase } from '../helpers/database.js';
import { tusService } from '../helpers/tus-service.js';

const hashOf = (text: string) => createHash('sha256').update(text);

describe('held hashes (tus running SHA-256 between requests)', () => {
  it('when a request continues a held hash, then it gets a copy: what it adds never reaches the held one', () => {
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 60_000 });
    held.save('u', 't1', 3, hashOf('abc'));
    held.copy('u', 't1', 3)!.update('refused bytes');
    expect(held.copy('u', 't1', 3)!.digest('hex')).to.equal(hashOf('abc').digest('hex'));
  });

  it('when the row names another token or another byte count, then nothing is continued and the entry goes', () => {
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 60_000 });
    held.save('u', 't1', 3, hashOf('abc'));
    expect(held.copy('u', 't2', 3)).to.equal(undefined);
    expect(held.size).to.equal(0);
    held.save('u', 't1', 3, hashOf('abc'));
    expect(held.copy('u', 't1', 4)).to.equal(undefined);
    expect(held.size).to.equal(0);
  });

  it('when more uploads are held than maxEntries, then the least recently saved goes first', () => {
    const held = new HeldHashes({ maxEntries: 2, maxAgeMs: 60_000 });
    held.save('a', 't', 1, hashOf('a'));
    held.save('b', 't', 1, hashOf('b'));
    held.save('a', 't', 2, hashOf('aa'));
    held.save('c', 't', 1, hashOf('c'));
    expect(held.size).to.equal(2);
    expect(held.copy('b', 't', 1)).to.equal(undefined);
    expect(held.copy('a', 't', 2)).to.not.equal(undefined);
    expect(held.copy('c', 't', 1)).to.not.equal(undefined);
  });

  it('when an entry is older than maxAgeMs, then it is gone', () => {
    let now = 0;
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 1000, now: () => now });
    held.save('old', 't', 1, hashOf('a'));
    now = 600;
    held.save('young', 't', 1, hashOf('b'));
    now = 1000;
    expect(held.copy('old', 't', 1)).to.equal(undefined);
    expect(held.copy('young', 't', 1)).to.not.equal(undefined);
    expect(held.size).to.equal(1);
  });

  it('when an upload is dropped (completed, terminated, expired), then it is held no more', () => {
    const held = new HeldHashes({ maxEntries: 10, maxAgeMs: 60_000 });
    held.save('u', 't', 1, hashOf('a'));
    held.drop('u');
    expect(held.size).to.equal(0);
  });
});

describe('held hashes on the service: an upload whose hash was evicted', function () {
  this.timeout(30_000);
  let t: TestDatabase;
  let store: LocalObjectStore;
  before(async () => {
    t = await testDatabase('pglite');
    store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
  });
  after(() => t?.close());

  it('when more uploads are in flight than the instance holds hashes for, then the evicted one is finished with the SHA-256 read from its object', async () => {
    const { accountId } = await t.account();
    const caller: Caller = {
      accountId,
      plan: { name: 'test', apiAccess: true, requestsPerMinute: 1000, requestsPerDay: 1000, maxFileSize: 1 << 24, dailyUploads: 100, concurrentUploads: null, maxTotalSize: null, maxExpiresIn: null },
    };
    let reads = 0;
    const service = tusService(t.prisma, store, { heldHashes: 1, onDigestRead: () => (reads += 1) });
    const [x, y] = [randomBytes(300_001), randomBytes(200_003)];
    const send = (id: string, offset: number, bytes: Buffer) => service.append(caller, id, { offset, body: PassThrough.from([bytes]) as never });
    const upX = await service.create(caller, { length: x.length, rawFilename: 'x.bin' });
    const upY = await service.create(caller, { length: y.length, rawFilename: 'y.bin' });
    await send(upX.id, 0, x.subarray(0, 100_000));
    // Y's hash takes the one place: X's goes.
    await send(upY.id, 0, y.subarray(0, 100_000));
    const doneX = await send(upX.id, 100_000, x.subarray(100_000));
    expect(doneX.status.file?.sha256).to.equal(createHash('sha256').update(x).digest('hex'));
    expect(reads).to.equal(1);
    const doneY = await send(upY.id, 100_000, y.subarray(100_000));
    expect(doneY.status.file?.sha256).to.equal(createHash('sha256').update(y).digest('hex'));
    expect(reads).to.equal(1);
  });
});
