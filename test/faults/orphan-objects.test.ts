// The sweep's last net (issue 51): a walk over the store's own objects that
// removes those older than the grace period which no file row and no
// pending record names, a bounded page per sweep, and reports them. It must
// never take an object something still names: a file, an upload in flight
// (plain, or tus with its S3 tail), an open upload's temp file, nor an
// object the server never wrote.
import { randomBytes } from 'node:crypto';
import { utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { OrphanObjects } from '../../src/files/orphans.js';
import { newStorageKey } from '../../src/files/record.js';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import type { ObjectStore, StoredObject } from '../../src/storage/object-store.js';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { uploadFile } from '../helpers/client.js';
import { backends, servicesOnly } from '../helpers/databases.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { BOUNDARY } from '../helpers/multipart.js';
import { eventually, startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, patch, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const HOUR = 3600 * 1000;

interface Setup {
  name: 'local' | 's3';
  t: TestServer;
  log: CapturedLog;
  store: ObjectStore;
  /** Puts an object at `key` that nothing names, written `ageMs` ago where the store lets a test say so (local). */
  put(key: string, ageMs: number): Promise<void>;
  /**
   * The grace a sweep is asked for: the default (an hour) on the local
   * store, whose files a test can age; 5 s on S3, whose clock it cannot move
   * (grace 0 would also take uploads in flight as abandoned, by their records).
   */
  grace: Record<string, unknown>;
  /** Resolves once objects put with an age have it (S3: once they are older than its grace). */
  aged(since: number): Promise<void>;
  /** Makes an object written now two hours old where the store lets a test (local); elsewhere nothing. */
  age(key: string): Promise<void>;
  close(): Promise<void>;
}

const setups: Record<'local' | 's3', () => Promise<Setup>> = {
  async local() {
    const log = captureLog('warn');
    const t = await startTestServer('pglite', { GC_INTERVAL: '0', SHUTDOWN_TIMEOUT: '1', LOG_LEVEL: 'warn' }, log.logger, { uploadHeartbeatMs: 300 });
    const root = join(t.dataDir, 'objects');
    const store = new LocalObjectStore({ root });
    return {
      name: 'local',
      t,
      log,
      store,
      async put(key, ageMs) {
        await store.put(key, Readable.from([randomBytes(100)]));
        const then = new Date(Date.now() - ageMs);
        await utimes(join(root, key), then, then);
      },
      grace: {},
      aged: async () => {},
      async age(key) {
        const then = new Date(Date.now() - 2 * HOUR);
        await utimes(join(root, key), then, then);
      },
      close: () => t.close(),
    };
  },
  async s3() {
    const s3: TestS3 = await startTestS3();
    const bucket = s3.bucket('orphans');
    const log = captureLog('warn');
    const t = await startTestServer('pglite', { ...s3.env(bucket), S3_PART_SIZE: String(5 * MiB), GC_INTERVAL: '0', SHUTDOWN_TIMEOUT: '1', LOG_LEVEL: 'warn' }, log.logger, {
      uploadHeartbeatMs: 300,
    });
    const store = new S3ObjectStore(s3.storeOptions(bucket));
    return {
      name: 's3',
      t,
      log,
      store,
      put: async (key) => void (await store.put(key, Readable.from([randomBytes(100)]))),
      // Far above the uploads' heartbeat (300 ms), so a loaded machine never makes a live upload look abandoned.
      grace: { grace_seconds: 5 },
      // LastModified may have whole seconds: a second more than the grace.
      aged: async (since) => void (await eventually(async () => Date.now() - since, (ms) => ms > 6000, 15_000)),
      age: async () => {},
      async close() {
        await store.close();
        await t.close();
        await s3.close();
      },
    };
  },
};

async function allKeys(store: ObjectStore): Promise<string[]> {
  const keys: string[] = [];
  let after: string | undefined;
  do {
    const page = await store.listObjects({ after, limit: 1000 });
    keys.push(...page.objects.map((o) => o.key));
    after = page.next;
  } while (after !== undefined);
  return keys.sort();
}

// The stores' halves need no service: the services stage (servicesOnly) leaves them to the other.
for (const name of servicesOnly ? [] : (['local', 's3'] as const)) {
  describe(`sweep: objects no file or record names (${name} store)`, function () {
    this.timeout(60_000);
    let s: Setup;
    before(async () => {
      s = await setups[name]();
    });
    after(async () => s?.close());

    it('when objects older than the grace period are nobody\'s, then one sweep removes and reports them, and leaves files, uploads in flight (plain and tus), young objects and keys the server never writes', async () => {
      const orphans = [newStorageKey(), newStorageKey()];
      for (const key of orphans) await s.put(key, 2 * HOUR);
      const foreign = ['notes/readme.txt', 'ab/not-a-storage-key', `${newStorageKey()}.bak`];
      for (const key of foreign) await s.put(key, 2 * HOUR);
      // An S3 tail whose upload has no record any more (a late write that landed after the upload was removed).
      if (s.name === 's3') {
        const strayTail = `${newStorageKey()}.tail1`;
        await s.put(strayTail, 2 * HOUR);
        orphans.push(strayTail);
      }
      const putAt = Date.now();

      const { apiKey } = await s.t.account();
      const file = (await uploadFile(s.t.server.url, apiKey, 'kept.txt', 'a file')).body;
      const fileKey = (await s.t.server.db.prisma.file.findUniqueOrThrow({ where: { id: file.file_id } })).storageKey;
      await s.age(fileKey);
      // An upload whose object is written and whose commit has not run yet: its record names the object.
      const committing = newStorageKey();
      if (s.name === 'local') {
        await new UploadLedger(s.t.server.db.prisma).recordUpload(committing, (await s.t.server.db.prisma.file.findUniqueOrThrow({ where: { id: file.file_id } })).accountId, new Date().toISOString().slice(0, 10));
        await s.put(committing, 2 * HOUR);
      }
      // A plain upload in flight: its record names it; it is an open upload (multipart, or a temp file), not an object.
      const live = startRawUpload(s.t.server.url, apiKey, 'live.bin');
      await writeBytes(live.req, 6 * MiB);
      expect(await eventually(() => s.t.server.db.prisma.pendingObject.count({ where: { reason: 'upload', uploadId: { not: null } } }), (n) => n === 1)).to.equal(1);
      // A tus upload in flight: on S3 its first bytes wait in a tail object (`<key>.tail0`), named by its record.
      const tus = await create(s.t.server.url, apiKey, { length: 3000, filename: 'tus.bin' });
      const tusUrl = uploadUrl(s.t.server.url, tus);
      expect((await patch(tusUrl, apiKey, 0, randomBytes(1000))).status).to.equal(204);
      await s.aged(putAt);
      const young = newStorageKey();
      await s.put(young, 0);
      const before = await allKeys(s.store);

      const swept = await s.t.admin('POST', '/admin/gc', s.grace);
      expect(swept).to.deep.include({ orphans: orphans.length, failed: 0 });
      const left = await allKeys(s.store);
      expect(left).to.deep.equal(before.filter((key) => !orphans.includes(key)));
      expect(left).to.include.members([...foreign, fileKey, young]);
      if (s.name === 'local') expect(left).to.include(committing);
      if (s.name === 's3') expect(left.filter((key) => key.endsWith('.tail0')), 'the tus upload\'s tail').to.have.length(1);
      // Reported: a warning naming each object removed.
      const reported = s.log.lines.filter((l) => l.msg === 'removed objects that no file or pending upload names');
      expect(reported.flatMap((l) => (l.orphans as { key: string }[]).map((o) => o.key)).sort()).to.deep.equal([...orphans].sort());

      // The uploads in flight finish as if nothing happened, and the next sweep finds nothing.
      live.req.end(`\r\n--${BOUNDARY}--\r\n`);
      expect((await live.outcome).status).to.equal(201);
      expect((await patch(tusUrl, apiKey, 1000, randomBytes(2000))).status).to.equal(204);
      expect(await s.t.admin('POST', '/admin/gc', s.grace)).to.deep.include({ orphans: 0, failed: 0 });
      expect(await s.t.admin('POST', '/admin/gc', { check: true, ...s.grace })).to.deep.include({ orphans_total: 0 });
    });
  });
}

for (const backend of backends) describe(`sweep: the walk over the store's objects, page by page (local store, ${backend})`, function () {
  this.timeout(60_000);
  let t: TestServer;
  let store: LocalObjectStore;
  const old = new Date(Date.now() - 2 * HOUR);
  const cutoff = new Date(Date.now() - HOUR);

  before(async () => {
    t = await startTestServer(backend, { GC_INTERVAL: '0' });
    store = new LocalObjectStore({ root: join(t.dataDir, 'objects') });
  });
  after(() => t?.close());

  /** `count` objects nobody names, written two hours ago, keys sorted. */
  async function orphans(count: number): Promise<string[]> {
    const keys = Array.from({ length: count }, () => newStorageKey()).sort();
    for (const key of keys) {
      await store.put(key, Readable.from([randomBytes(10)]));
      await utimes(join(t.dataDir, 'objects', key), old, old);
    }
    return keys;
  }
  const position = async () => (await t.server.db.prisma.sweepPosition.findUnique({ where: { name: 'objects' } }))?.position;

  it('when the store holds more objects than one sweep lists, then each sweep lists the page after the last one, from any instance, and the walk starts over at the end', async () => {
    const keys = await orphans(7);
    const walk = () => new OrphanObjects(t.server.db.prisma, store, { mode: 'remove', perSweep: 3 });
    // Each sweep a new walker, as after a restart or on another instance: the position is the database's.
    expect(await walk().sweep(cutoff)).to.deep.equal({ listed: 3, orphans: 3, failed: 0 });
    expect(await position()).to.equal(keys[2]);
    expect(await walk().sweep(cutoff)).to.deep.equal({ listed: 3, orphans: 3, failed: 0 });
    expect(await position()).to.equal(keys[5]);
    expect(await walk().sweep(cutoff)).to.deep.equal({ listed: 1, orphans: 1, failed: 0 });
    expect(await position(), 'the end: the next walk starts over').to.equal('');
    expect(await allKeys(store)).to.deep.equal([]);
    const more = await orphans(2);
    expect(await walk().sweep(cutoff)).to.deep.equal({ listed: 2, orphans: 2, failed: 0 });
    expect(more).to.have.length(2);
  });

  it('when three instances sweep at once, then no page is walked twice: each object is judged by one of them', async () => {
    await t.server.db.prisma.sweepPosition.deleteMany();
    const keys = await orphans(6);
    const found: string[][] = [[], [], []];
    const walkers = found.map((into) => new OrphanObjects(t.server.db.prisma, store, { mode: 'report', perSweep: 2, onFound: (o: StoredObject[]) => into.push(...o.map((x) => x.key)) }));
    for (let round = 0; round < 6 && found.flat().length < keys.length; round++) await Promise.all(walkers.map((w) => w.sweep(cutoff)));
    const all = found.flat();
    expect(all.sort(), 'each orphan once').to.deep.equal(keys);
    expect(await allKeys(store), 'report mode removes nothing').to.deep.equal(keys);
    for (const key of keys) await store.delete(key);
  });

  it('when the walk is off, then a sweep lists nothing; a check still reports, removing nothing', async () => {
    const keys = await orphans(1);
    expect(await new OrphanObjects(t.server.db.prisma, store, { mode: 'off', perSweep: 10 }).sweep(cutoff)).to.deep.equal({ listed: 0, orphans: 0, failed: 0 });
    const checked = await new OrphanObjects(t.server.db.prisma, store, { mode: 'off', perSweep: 10 }).check(cutoff);
    expect(checked.total).to.equal(1);
    expect(checked.orphans.map((o) => o.key)).to.deep.equal(keys);
    expect(await allKeys(store)).to.deep.equal(keys);
  });
});
