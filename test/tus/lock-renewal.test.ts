// A PATCH outlives its lease: the request holding an upload's lease renews
// it (every third of a lease) for as long as it runs, so a body that takes
// several lease periods keeps the upload to itself and commits at the end.
// Two ResumableUploads over one database stand for two instances (no
// takeover: the second may only take a lease that ran out), with a lease of
// 1.2 s where the server's is 30 s (short, yet four renewal periods of
// 400 ms, so a busy event loop does not lose it).
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import type { Caller } from '../../src/accounts/service.js';
import { tusService } from '../helpers/tus-service.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { sleep } from '../helpers/raw-upload.js';
import { testDatabase, type TestDatabase } from '../helpers/database.js';

const LEASE_MS = 1200;
const KiB = 1024;

describe('resumable uploads: a PATCH renews its lease while it runs', function () {
  this.timeout(40_000);
  let t: TestDatabase;
  let store: LocalObjectStore;
  before(async () => {
    t = await testDatabase('pglite');
    store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
  });
  after(() => t?.close());

  const instance = () =>
    tusService(t.prisma, store, { leaseMs: LEASE_MS, takeoverMs: 0 });

  it(`when a PATCH's body takes four ${LEASE_MS} ms leases, then no other instance gets the upload meanwhile, and the PATCH commits every byte`, async () => {
    const { accountId } = await t.account();
    const caller: Caller = {
      accountId,
      plan: { name: 'test', apiAccess: true, requestsPerMinute: 1000, requestsPerDay: 1000, maxFileSize: 1 << 20, dailyUploads: 100, concurrentUploads: null, maxTotalSize: null, maxExpiresIn: null },
    };
    const a = instance();
    const b = instance();
    const upload = await a.create(caller, { length: 96 * KiB, rawFilename: 'slow.bin' });
    const body = new PassThrough();
    const appending = a.append(caller, upload.id, { offset: 0, body });
    const started = Date.now();
    // A slow but steady client: 1 KiB every 60 ms, never quiet for long.
    let refusals = 0;
    for (let sent = 0; sent < 96 * KiB; sent += KiB) {
      body.write(Buffer.alloc(KiB, sent / KiB));
      await sleep(60);
      // Every few writes the other instance tries to continue the upload from 0.
      if (sent % (16 * KiB) === 0 && sent > 0) {
        const other = await b.append(caller, upload.id, { offset: 0, body: PassThrough.from([Buffer.alloc(1)]) as never }).catch((err: unknown) => err);
        expect(other, `at ${Date.now() - started} ms`).to.have.property('code', 'upload_busy');
        refusals += 1;
      }
    }
    body.end();
    const outcome = await appending;
    expect(Date.now() - started).to.be.greaterThan(4 * LEASE_MS);
    expect(refusals).to.equal(5);
    expect(outcome.status.offset).to.equal(96 * KiB);
    expect(outcome.status.file).to.not.equal(undefined);
  });
});
