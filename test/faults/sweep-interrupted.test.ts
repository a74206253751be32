// The sweep never forgets an object it has not deleted: a sweep stopped
// between any two of its steps (claim, removal from the store, removal of
// the record) leaves every object in the store with a record, and the next
// sweep removes what is left. The steps run with a hook that stops the sweep
// there, as a crash would (nothing after it runs, nothing is undone).
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { Sweeper, type SweepStep } from '../../src/files/sweeper.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { testDatabase, type TestDatabase } from '../helpers/database.js';

// Long enough for the next sweep to come within the claim on a loaded machine
// (1 s did not always); the sweep after it is polled for until the claim ran out.
const CLAIM_SECONDS = 3;

class Crash extends Error {}

for (const backend of backends) {
  describe(`faults: a sweep interrupted between its steps (${backend})`, () => {
    let t: TestDatabase;
    let store: LocalObjectStore;
    let sweeper: (options?: ConstructorParameters<typeof Sweeper>[4]) => Sweeper;

    before(async () => {
      t = await testDatabase(backend);
      const prisma = t.prisma;
      store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
      sweeper = (options) => new Sweeper(prisma, store, new UploadLedger(prisma), undefined, options);
    });
    after(() => t?.close());

    /** Keys of the objects in the store. */
    const objects = async () => (await t.objects()).map((p) => relative(join(t.dataDir, 'objects'), p)).sort();
    const records = async () => (await t.prisma.pendingObject.findMany({ select: { storageKey: true } })).map((r) => r.storageKey).sort();

    /** Three objects of deleted files, each with its record. */
    async function leftovers(run: string): Promise<string[]> {
      const keys = ['a', 'b', 'c'].map((k) => `sweep-${run}/${k}`);
      for (const key of keys) {
        await store.put(key, Readable.from([Buffer.from(key)]));
        await t.prisma.pendingObject.create({ data: { storageKey: key, reason: 'delete' } });
      }
      return keys;
    }

    const steps: SweepStep[] = ['claimed', 'discarded', 'forgotten'];
    for (const step of steps) {
      for (const index of [0, 2]) {
        it(`when the sweep stops after "${step}" of object ${index + 1} of 3, then every object left has a record, and the next sweep removes them all`, async () => {
          const keys = await leftovers(`${step}-${index}`);
          const crashing = sweeper({
            claimSeconds: CLAIM_SECONDS,
            onStep: async (at, key) => {
              if (at === step && key === keys[index]) throw new Crash(`stopped after ${step}`);
            },
          });
          let crashed: unknown;
          await crashing.sweep(0).catch((err: unknown) => (crashed = err));
          expect(crashed).to.be.instanceOf(Crash);

          const left = (await objects()).filter((k) => keys.includes(k));
          const recorded = await records();
          for (const key of left) expect(recorded, `${key} is in the store`).to.include(key);

          // Another instance's sweep respects the live claim of the one that stopped...
          await sweeper().sweep(0);
          if (step !== 'forgotten') expect(await records()).to.include(keys[index]);
          // ...and finishes its work once the claim expired.
          const afterSweep = async () => {
            const { failed } = await sweeper().sweep(0);
            return { failed, objects: (await objects()).filter((k) => keys.includes(k)), records: (await records()).filter((k) => keys.includes(k)) };
          };
          const done = (left: { failed: number; objects: string[]; records: string[] }) => left.failed > 0 || left.objects.length + left.records.length === 0;
          expect(await eventually(afterSweep, done, CLAIM_SECONDS * 1000 + 5_000)).to.deep.equal({ failed: 0, objects: [], records: [] });
        });
      }
    }
  });
}
