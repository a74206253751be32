// The upload ledger (src/ledger) on a real database, PGlite and PostgreSQL:
// the contract every upload path (plain, tus, file requests) and the sweep
// rely on. Its records' claims (one winner, however many race), letting a
// claim go, the slot and reservation each upload record holds, given back
// exactly once and in the statement that drops or settles the record. Then
// uploads and deletes stopped between every two of their steps, as a crash
// would stop them (the steps after it never run, nothing is undone),
// followed by the sweep: nothing is left in the store that no record names,
// no slot comes back twice, and no file is ever visible half-written.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { expect } from 'chai';
import { removeFileRow } from '../../src/files/file-rows.js';
import { commitFile, UploadSweptError } from '../../src/intake/finish.js';
import { newStorageKey } from '../../src/files/record.js';
import { DailyUploads } from '../../src/ledger/daily-uploads.js';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { Sweeper } from '../../src/files/sweeper.js';
import type { PrismaClient } from '../../src/generated/prisma/client.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { backends } from '../helpers/databases.js';
import { sleep } from '../helpers/raw-upload.js';
import { testDatabase, type TestDatabase } from '../helpers/database.js';

/** Slots a day: far more than the tests take. */
const LIMIT = 1000;

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

for (const backend of backends) {
  describe(`ledger: pending records, their claims, slots and reservations (${backend})`, function () {
    this.timeout(60_000);
    let t: TestDatabase;
    let prisma: PrismaClient;
    let store: LocalObjectStore;
    let quota: DailyUploads;
    let ledger: UploadLedger;
    let accountId: number;

    before(async () => {
      t = await testDatabase(backend);
      prisma = t.prisma;
      store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
      quota = new DailyUploads(prisma);
      ledger = new UploadLedger(prisma);
    });
    after(() => t?.close());

    beforeEach(async () => {
      ({ accountId } = await t.account());
    });

    const sweep = (graceSeconds = 0) => new Sweeper(prisma, store, ledger).sweep(graceSeconds);
    const record = (storageKey: string) => prisma.pendingObject.findUnique({ where: { storageKey } });
    /** Slots the account has taken today (and every day). */
    const slots = async () => (await prisma.dailyUpload.aggregate({ where: { accountId }, _sum: { count: true } }))._sum.count ?? 0;
    /** The upload record of a new key, holding a slot taken now. */
    async function recordedUpload(): Promise<string> {
      const key = newStorageKey();
      const day = await quota.take(accountId, LIMIT);
      await ledger.recordUpload(key, accountId, day!);
      return key;
    }

    describe('claims', () => {
      it('when a sweep claims a record, then a second claim fails until the first is let go, and then succeeds', async () => {
        const key = await recordedUpload();
        const row = (await record(key))!;
        const now = new Date();
        const until = new Date(now.getTime() + 60_000);
        expect(await ledger.claim(row, now, until)).to.equal(true);
        expect(await ledger.claim(row, new Date(), new Date(Date.now() + 60_000)), 'a live claim holds').to.equal(false);
        await ledger.letGo(key, until);
        expect((await record(key))?.claimedUntil).to.equal(null);
        expect(await ledger.claim(row, new Date(), new Date(Date.now() + 60_000)), 'let go: free again').to.equal(true);
      });

      it('when a claim has run out, then another sweep takes the record over, and the first can neither let go nor forget it', async () => {
        const key = await recordedUpload();
        const row = (await record(key))!;
        const first = new Date(Date.now() - 1);
        expect(await ledger.claim(row, new Date(Date.now() - 1000), first)).to.equal(true);
        const second = new Date(Date.now() + 60_000);
        expect(await ledger.claim(row, new Date(), second)).to.equal(true);
        await ledger.letGo(key, first);
        expect((await record(key))?.claimedUntil?.getTime()).to.equal(second.getTime());
        expect(await ledger.forgetSwept(row, first)).to.equal(false);
        expect(await record(key)).to.not.equal(null);
        expect(await ledger.forgetSwept(row, second)).to.equal(true);
        expect(await record(key)).to.equal(null);
      });

      it('when the upload was touched after the sweep read its record, then the claim fails (it is alive)', async () => {
        const key = await recordedUpload();
        const row = (await record(key))!;
        await sleep(5);
        await ledger.touch(key);
        expect(await ledger.claim(row, new Date(), new Date(Date.now() + 60_000))).to.equal(false);
      });

      it('when eight sweeps race to claim one record, then exactly one wins', async () => {
        const key = await recordedUpload();
        const row = (await record(key))!;
        const won = await Promise.all(Array.from({ length: 8 }, () => ledger.claim(row, new Date(), new Date(Date.now() + 60_000))));
        expect(won.filter(Boolean)).to.have.length(1);
      });

      it('when a commit races a sweep claiming its record, then exactly one wins: a file, or a claim and UploadSweptError', async () => {
        for (let i = 0; i < 5; i++) {
          const key = await recordedUpload();
          await store.put(key, Readable.from([Buffer.from('abc')]));
          const row = (await record(key))!;
          const [claimed, committed] = await Promise.all([
            ledger.claim(row, new Date(), new Date(Date.now() + 60_000)),
            commitFile(prisma, { accountId, filename: 'race.txt', size: 3, sha256: sha(Buffer.from('abc')), storageKey: key }).then(
              () => true,
              (err: unknown) => {
                if (err instanceof UploadSweptError) return false;
                throw err;
              },
            ),
          ]);
          expect(claimed !== committed, `claimed ${claimed}, committed ${committed}`).to.equal(true);
          const file = await prisma.file.findUnique({ where: { storageKey: key } });
          expect(Boolean(file)).to.equal(committed);
          expect(Boolean(await record(key))).to.equal(claimed);
        }
      });

      it('when a sweep holds the record, then commitFile writes nothing and throws UploadSweptError', async () => {
        const key = await recordedUpload();
        const row = (await record(key))!;
        expect(await ledger.claim(row, new Date(), new Date(Date.now() + 60_000))).to.equal(true);
        const err = await commitFile(prisma, { accountId, filename: 'late.txt', size: 0, sha256: sha(Buffer.alloc(0)), storageKey: key }).catch((e: unknown) => e);
        expect(err).to.be.instanceOf(UploadSweptError);
        expect(await prisma.file.count({ where: { accountId } })).to.equal(0);
        expect(await record(key)).to.not.equal(null);
      });
    });

    describe('reservations against the storage quota', () => {
      /** Bytes the account's uploads in flight reserved, as the account counts them and as their records hold them. */
      async function reserved(): Promise<{ account: number; records: number }> {
        const account = await prisma.account.findUnique({ where: { id: accountId }, select: { reservedBytes: true } });
        const records = await prisma.pendingObject.aggregate({ where: { accountId }, _sum: { reservedBytes: true } });
        return { account: Number(account!.reservedBytes), records: Number(records._sum.reservedBytes ?? 0n) };
      }
      /** An upload record holding a slot and `bytes` reserved. */
      async function reservingUpload(bytes: number): Promise<string> {
        const key = await recordedUpload();
        expect(await ledger.storage.reserve(accountId, key, bytes, 1e12, false)).to.equal(bytes);
        return key;
      }

      it('when a failed upload ends (its object left for the sweep, or gone), then its reservation goes back in the statement that marks it, once', async () => {
        const other = await reservingUpload(7); // another upload in flight: its share stays
        const left = await reservingUpload(1000);
        const gone = await reservingUpload(500);
        expect(await reserved()).to.deep.equal({ account: 1507, records: 1507 });
        await Promise.all([ledger.endUpload(left, { now: new Date() }), ledger.endUpload(left, { now: new Date() })]);
        await ledger.endUpload(gone, { now: new Date() });
        await ledger.cleanedUp(gone, new Date());
        expect(await record(gone)).to.equal(null);
        await ledger.endUpload(gone, { now: new Date() });
        expect(await reserved()).to.deep.equal({ account: 7, records: 7 });
        expect(await record(other)).to.deep.include({ reservedBytes: 7n });
      });

      it('when the sweep forgets an abandoned upload, then its reservation goes with the record', async () => {
        const key = await reservingUpload(4096);
        await store.put(key, Readable.from([Buffer.from('left')]));
        expect(await sweep()).to.deep.include({ failed: 0 });
        expect(await record(key)).to.equal(null);
        expect(await reserved()).to.deep.equal({ account: 0, records: 0 });
      });

      it('when a tus upload\'s record is forgotten, then its reservation goes with it', async () => {
        const key = newStorageKey();
        const day = await quota.take(accountId, LIMIT);
        await ledger.recordUpload(key, accountId, day!);
        await ledger.markResumable(key, undefined);
        expect(await ledger.storage.reserve(accountId, key, 2048, 1e12, false)).to.equal(2048);
        expect(await prisma.$transaction((tx) => ledger.forgetResumable(tx, key))).to.equal(true);
        expect(await prisma.$transaction((tx) => ledger.forgetResumable(tx, key)), 'once').to.equal(false);
        expect(await reserved()).to.deep.equal({ account: 0, records: 0 });
      });

      it('when the account\'s reserved_bytes has drifted from its records, then recountReservations puts it back to their sum', async () => {
        await reservingUpload(300);
        await prisma.$executeRaw`UPDATE accounts SET reserved_bytes = reserved_bytes + 5000 WHERE id = ${accountId}`;
        expect(await reserved()).to.deep.equal({ account: 5300, records: 300 });
        expect(await ledger.recountReservations()).to.be.at.least(1);
        expect(await reserved()).to.deep.equal({ account: 300, records: 300 });
        expect(await ledger.recountReservations()).to.equal(0);
        expect(await reserved(), 'a second recount changes nothing').to.deep.equal({ account: 300, records: 300 });
      });
    });

    describe('slots', () => {
      it('when a failed upload ends twice, or ends and races another end, then its slot comes back once', async () => {
        await quota.take(accountId, LIMIT); // a slot of another upload, so a second release would show
        const key = await recordedUpload();
        expect(await slots()).to.equal(2);
        await Promise.all([ledger.endUpload(key, { now: new Date() }), ledger.endUpload(key, { now: new Date() })]);
        expect(await slots()).to.equal(1);
        expect(await record(key), 'the object may be left: the record stays for the sweep').to.deep.include({ accountId: null, quotaDay: null });
        expect((await record(key))?.endedAt).to.be.instanceOf(Date);
        await ledger.cleanedUp(key, new Date());
        expect(await slots()).to.equal(1);
        expect(await record(key)).to.equal(null);
      });

      it('when a write of a failed upload was cut, then its record gives back its slot and stays, after its clean-up, until the late-write window has passed', async () => {
        const key = await recordedUpload();
        const now = new Date();
        const lateUntil = new Date(now.getTime() + 60_000);
        await ledger.endUpload(key, { now, lateUntil });
        expect(await slots()).to.equal(0);
        await ledger.cleanedUp(key, new Date());
        expect(await record(key), 'the store may still apply the write').to.deep.include({ lateUntil, retryAt: lateUntil });
        await ledger.cleanedUp(key, lateUntil);
        expect(await record(key)).to.equal(null);
        expect(await slots()).to.equal(0);
      });

      it('when an upload settled its slot and then the sweep removes its object, then the slot is not given back again', async () => {
        await quota.take(accountId, LIMIT);
        const key = await recordedUpload();
        await store.put(key, Readable.from([Buffer.from('left')]));
        await ledger.endUpload(key, { now: new Date() }); // the store was down for its discard
        expect(await slots()).to.equal(1);
        expect(await sweep()).to.deep.include({ failed: 0 });
        expect(await store.head(key)).to.equal(undefined);
        expect(await record(key)).to.equal(null);
        expect(await slots()).to.equal(1);
      });

      it('when a failed upload settles while a sweep that already read its record removes it, then the slot comes back once', async () => {
        await quota.take(accountId, LIMIT);
        const key = await recordedUpload();
        await store.put(key, Readable.from([Buffer.from('left')]));
        const sweeper = new Sweeper(prisma, store, ledger, undefined, {
          // Between the sweep's claim and its forgetting: the upload's own abort gives the slot back.
          onStep: async (step, at) => {
            if (step === 'claimed' && at === key) await ledger.endUpload(key, { now: new Date() });
          },
        });
        await sweeper.sweep(0);
        expect(await store.head(key)).to.equal(undefined);
        expect(await record(key)).to.equal(null);
        expect(await slots()).to.equal(1);
      });

      it('when the sweep forgets an upload\'s record, then its slot comes back in that statement, and only while the record held it', async () => {
        const key = await recordedUpload();
        const settled = await recordedUpload();
        await ledger.endUpload(settled, { now: new Date() }); // its slot is back already; the record stays for the sweep
        expect(await slots()).to.equal(1);
        const until = new Date(Date.now() + 60_000);
        for (const k of [key, settled]) expect(await ledger.claim((await record(k))!, new Date(), until)).to.equal(true);
        expect(await ledger.forgetSwept((await record(settled))!, until)).to.equal(true);
        expect(await slots(), 'a settled record gives nothing back').to.equal(1);
        expect(await ledger.forgetSwept((await record(key))!, until)).to.equal(true);
        expect(await slots(), 'no second call: the forgetting gave it back').to.equal(0);
      });

      it('when a tus upload\'s record is forgotten twice, then its slot comes back with the first, once', async () => {
        const key = newStorageKey();
        const day = await quota.take(accountId, LIMIT);
        await ledger.recordUpload(key, accountId, day!);
        await ledger.markResumable(key, undefined);
        expect(await slots()).to.equal(1);
        expect(await prisma.$transaction((tx) => ledger.forgetResumable(tx, key))).to.equal(true);
        expect(await slots()).to.equal(0);
        await quota.take(accountId, LIMIT); // another upload's slot, so a second release would show
        expect(await prisma.$transaction((tx) => ledger.forgetResumable(tx, key))).to.equal(false);
        expect(await slots()).to.equal(1);
      });

      it('when starting an upload with a slot fails, then the slot comes back and the error goes on; when none is left, 403 daily_upload_limit', async () => {
        await quota.take(accountId, LIMIT);
        const boom = new Error('boom');
        const err = await ledger.open(accountId, LIMIT, async () => Promise.reject(boom), () => {}).catch((e: unknown) => e);
        expect(err).to.equal(boom);
        expect(await slots()).to.equal(1);
        expect(await ledger.open(accountId, LIMIT, async (day) => day, () => {})).to.match(/^\d{4}-\d{2}-\d{2}$/);
        expect(await slots()).to.equal(2);
        const full = await ledger.open(accountId, 2, async () => 'started', () => {}).catch((e: unknown) => e);
        expect(full).to.have.property('code', 'daily_upload_limit');
        expect(await slots()).to.equal(2);
      });
    });

    // The steps of an upload as FileService and Upload run them; a crash
    // after step n means steps 1..n ran and nothing else did.
    describe('an upload stopped between its steps, then swept', () => {
      const data = Buffer.from('the bytes of an upload that may never finish');

      interface Run {
        key: string;
        day?: string;
        uploadId?: string;
        body?: PassThrough;
        put?: Promise<unknown>;
      }
      const steps: { name: string; run: (r: Run) => Promise<void> }[] = [
        { name: 'slot taken', run: async (r) => void (r.day = await quota.take(accountId, LIMIT)) },
        { name: 'recorded', run: (r) => ledger.recordUpload(r.key, accountId, r.day!) },
        {
          name: 'store upload started',
          run: async (r) => {
            r.body = new PassThrough();
            let started!: () => void;
            const recorded = new Promise<void>((resolve) => (started = resolve));
            r.put = store.put(r.key, r.body, {
              onStarted: async (uploadId) => {
                r.uploadId = uploadId;
                await ledger.setUploadId(r.key, uploadId);
                started();
              },
            });
            r.put.catch(() => {});
            await recorded;
            r.body.write(data.subarray(0, 10));
            while (!(await t.tempFiles()).some((p) => p.endsWith(r.uploadId!))) await sleep(5);
          },
        },
        {
          name: 'object stored',
          run: async (r) => {
            r.body!.end(data.subarray(10));
            await r.put;
          },
        },
        {
          name: 'committed',
          run: async (r) => void (await commitFile(prisma, { accountId, filename: 'crash.txt', size: data.length, sha256: sha(data), storageKey: r.key })),
        },
      ];

      /** What the store holds of the upload: the object, and its temp file. */
      async function held(r: Run): Promise<string[]> {
        const temp = r.uploadId && (await t.tempFiles()).some((p) => p.endsWith(r.uploadId!)) ? ['temp file'] : [];
        return [...temp, ...((await store.head(r.key)) ? ['object'] : [])];
      }

      /** A file row is visible only whole: object stored, complete, counted. */
      async function expectNothingHalfWritten(r: Run): Promise<boolean> {
        const file = await prisma.file.findUnique({ where: { storageKey: r.key } });
        const account = await prisma.account.findUniqueOrThrow({ where: { id: accountId } });
        expect(account.fileCount).to.equal(file ? 1 : 0);
        expect(Number(account.totalBytes)).to.equal(file ? data.length : 0);
        if (file) {
          expect(file.sha256).to.equal(sha(data));
          expect((await store.head(r.key))?.size).to.equal(data.length);
        }
        return Boolean(file);
      }

      for (let done = 0; done <= steps.length; done++) {
        const last = done === 0 ? 'before its first step' : `after "${steps[done - 1]!.name}"`;
        it(`when an upload stops ${last}, then the store holds nothing without a record, the sweep leaves no bytes and gives the slot back once`, async () => {
          await quota.take(accountId, LIMIT); // another upload's slot, so a second release would show
          const r: Run = { key: newStorageKey() };
          try {
            for (const step of steps.slice(0, done)) await step.run(r);

            // The crash: whatever the store holds belongs to a file or has a record naming it.
            const isFile = await expectNothingHalfWritten(r);
            expect(isFile).to.equal(done === steps.length);
            if (!isFile && (await held(r)).length > 0) expect(await record(r.key), 'the store holds bytes').to.not.equal(null);

            await sweep();
            const committed = done === steps.length;
            expect(await held(r)).to.deep.equal(committed ? ['object'] : []);
            expect(await record(r.key)).to.equal(null);
            expect(await expectNothingHalfWritten(r)).to.equal(committed);
            // The slot: kept by the file; given back by the sweep when the record held it. A crash
            // between taking it and recording it loses it for the day (nothing names it): known.
            const expected = committed || done === 1 ? 2 : 1;
            expect(await slots()).to.equal(expected);
            await sweep();
            expect(await slots(), 'a second sweep gives nothing back').to.equal(expected);
          } finally {
            r.body?.destroy();
            await r.put?.catch(() => {});
          }
        });
      }
    });

    // The steps of a failed upload's clean-up (Upload.abort).
    describe('a failed upload stopped during its clean-up, then swept', () => {
      const steps = ['ended', 'discarded', 'forgotten'] as const;
      for (let done = 0; done <= steps.length; done++) {
        const last = done === 0 ? 'before it began' : `after "${steps[done - 1]}"`;
        it(`when the clean-up stops ${last}, then the sweep leaves no bytes and the slot comes back once`, async () => {
          await quota.take(accountId, LIMIT);
          const key = await recordedUpload();
          await store.put(key, Readable.from([Buffer.from('failed upload')]));
          if (done >= 1) await ledger.endUpload(key, { now: new Date() });
          if (done >= 2) await store.discard(key);
          if (done >= 3) await ledger.cleanedUp(key, new Date());
          await sweep();
          expect(await store.head(key)).to.equal(undefined);
          expect(await record(key)).to.equal(null);
          expect(await slots()).to.equal(1);
          await sweep();
          expect(await slots()).to.equal(1);
        });
      }
    });

    // The steps of FileService.delete.
    describe('a delete stopped between its steps, then swept', () => {
      const steps = ['row removed', 'object removed', 'record forgotten'] as const;
      for (let done = 0; done <= steps.length; done++) {
        const last = done === 0 ? 'before its first step' : `after "${steps[done - 1]}"`;
        it(`when a delete stops ${last}, then the file is whole or gone (never half), and the sweep leaves neither object nor record`, async () => {
          const key = await recordedUpload();
          const data = Buffer.from('a file to delete');
          await store.put(key, Readable.from([data]));
          const file = await commitFile(prisma, { accountId, filename: 'doomed.txt', size: data.length, sha256: sha(data), storageKey: key });
          const slotsBefore = await slots();

          if (done >= 1) expect(await removeFileRow(prisma, accountId, file.id)).to.equal(key);
          if (done >= 2) await store.delete(key);
          if (done >= 3) await ledger.forgetRemoved(key);

          const visible = async () => {
            const row = await prisma.file.findUnique({ where: { id: file.id } });
            const account = await prisma.account.findUniqueOrThrow({ where: { id: accountId } });
            expect(account.fileCount).to.equal(row ? 1 : 0);
            expect(Number(account.totalBytes)).to.equal(row ? data.length : 0);
            if (row) expect((await store.head(key))?.size, 'a visible file has its whole object').to.equal(data.length);
            return Boolean(row);
          };
          expect(await visible()).to.equal(done === 0);
          if (done >= 1 && (await store.head(key))) expect((await record(key))?.reason, 'the object has a record').to.equal('delete');

          await sweep();
          expect(await visible()).to.equal(done === 0);
          expect(Boolean(await store.head(key))).to.equal(done === 0);
          expect(await record(key)).to.equal(null);
          expect(await slots(), 'a delete gives no slot back').to.equal(slotsBefore);
        });
      }
    });
  });
}
