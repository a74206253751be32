// The tus lock's contract (src/tus/locker.ts), after tus-node-server's
// Locker suite (packages/server/src/test/Locker.test.ts): one holder at a
// time across lockers (two UploadLockers over one database stand for two
// instances); a newcomer asks the holder to let go and gets the lock once it
// unlocked, not before; only unlock() ends a lock: saving what a request
// stored does not. On PGlite and PostgreSQL.
import { join } from 'node:path';
import { expect } from 'chai';
import type { Caller } from '../../src/accounts/types.js';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { LockTakenOver, UploadLocker } from '../../src/tus/locker.js';
import { ResumableRecords } from '../../src/tus/records.js';
import { backends } from '../helpers/databases.js';
import { testDatabase, type TestDatabase } from '../helpers/database.js';
import { tusService } from '../helpers/tus-service.js';

for (const backend of backends) {
  describe(`tus: the upload lock's contract (${backend})`, function () {
    this.timeout(30_000);
    let t: TestDatabase;
    let records: ResumableRecords;
    let store: LocalObjectStore;
    let caller: Caller;
    /** A locker as an instance has one: `takeoverMs` 0 never asks the holder. */
    const locker = (takeoverMs = 0) => new UploadLocker(records, { leaseMs: 30_000, takeoverMs, clock: () => new Date(), onError: (err) => { throw err; } });
    const newUpload = async () => (await tusService(t.prisma, store).create(caller, { length: 10, rawFilename: 'locked.bin' })).id;

    before(async () => {
      t = await testDatabase(backend);
      store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
      records = new ResumableRecords(t.prisma, new UploadLedger(t.prisma));
    });
    after(() => t?.close());
    beforeEach(async () => {
      const { accountId } = await t.account();
      caller = {
        accountId,
        plan: { name: 'test', apiAccess: true, requestsPerMinute: 1000, requestsPerDay: 1000, maxFileSize: 1 << 20, dailyUploads: 100, concurrentUploads: null, maxTotalSize: null, maxExpiresIn: null },
      };
    });

    it('when an upload is locked, then no other locker gets it until the holder unlocks, and then one does', async () => {
      const id = await newUpload();
      const first = await locker().lock(id, caller.accountId, 0);
      expect(first, 'the first lock').to.not.equal(undefined);
      expect(await locker().lock(id, caller.accountId, 0), 'held elsewhere').to.equal(undefined);
      await first!.unlock();
      await first!.unlock(); // a second unlock changes nothing
      const second = await locker().lock(id, caller.accountId, 0);
      expect(second, 'free again').to.not.equal(undefined);
      await second!.unlock();
    });

    it('when the holder saves what its request stored, then the lock is still held until its unlock', async () => {
      const id = await newUpload();
      const lock = (await locker().lock(id, caller.accountId, 0))!;
      const { row } = lock;
      const saved = await records.commit(id, lock.token, { ...row, offset: 4, interrupted: false });
      expect(saved, 'saved under the lock').to.equal(true);
      expect(await locker().lock(id, caller.accountId, 4), 'a commit is not an unlock').to.equal(undefined);
      await lock.unlock();
      const next = await locker().lock(id, caller.accountId, 4);
      expect(next?.row.offset).to.equal(4);
      await next!.unlock();
    });

    it('when a newcomer asks for a held lock, then the holder is told to stop, and the newcomer gets the lock only after the holder unlocked', async () => {
      const id = await newUpload();
      const here = locker(5_000);
      const holder = (await here.lock(id, caller.accountId))!;
      let unlockedAt = 0;
      holder.signal.addEventListener('abort', () => {
        // The holder finishes its work first, as a PATCH saves what it stored.
        setTimeout(() => void holder.unlock().then(() => (unlockedAt = Date.now())), 200);
      });
      const newcomer = await here.lock(id, caller.accountId);
      expect(holder.signal.reason).to.be.instanceOf(LockTakenOver);
      expect(newcomer, 'the newcomer got it').to.not.equal(undefined);
      expect(unlockedAt, 'after the unlock').to.be.above(0);
      await newcomer!.unlock();
    });

    it('when a holder does not let go within the takeover time, then the newcomer gets nothing and the holder keeps its lock', async () => {
      const id = await newUpload();
      const here = locker(300);
      const holder = (await here.lock(id, caller.accountId))!;
      expect(await here.lock(id, caller.accountId)).to.equal(undefined);
      expect(holder.signal.aborted, 'asked to stop').to.equal(true);
      expect(await locker().lock(id, caller.accountId), 'still held').to.equal(undefined);
      await holder.unlock();
    });
  });
}
