// One account cannot shut the others out: its uploads at once are capped by
// its plan (429 too_many_uploads, across instances through Redis), and
// uploads that stall are cut for being slow (408 upload_too_slow), leaving
// nothing behind: on the local store and on S3 (s3rver in this process, or
// TEST_S3_ENDPOINT), where a cut upload must leave no multipart upload open.
import { expect } from 'chai';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { Redis } from 'ioredis';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, uploadFile } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { eventually, sleep, startRawUpload, writeBytes, type Outcome } from '../helpers/raw-upload.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startServerProcess } from '../helpers/server-process.js';
import { startTestServer, startTwoInstances, type TestServer } from '../helpers/server.js';
import { create, OCTETS, TUS } from '../helpers/tus.js';
import { allOpenUploads, startTestS3 } from '../helpers/test-s3.js';
import { LEASE_MS } from '../../src/limits/concurrent-uploads.js';
import { S3ObjectStore } from '../../src/storage/s3.js';

// Short settings: a body must bring 1 KiB/s averaged over 2 s.
const SLOW = { UPLOAD_MIN_RATE: '1024', UPLOAD_RATE_WINDOW: '2' };
const MiB = 1024 * 1024;
const NOISY_PLAN = { api_access: true, requests_per_minute: 100_000, requests_per_day: 100_000, max_file_size: 1 << 30, daily_uploads: 1000, concurrent_uploads: 2 };

/** What an account left behind: file rows, pending records, today's daily count. */
async function leftovers(t: TestServer, accountId: number) {
  const { prisma } = t.server.db;
  const [files, pending, days] = await Promise.all([
    prisma.file.count({ where: { accountId } }),
    prisma.pendingObject.count(),
    prisma.dailyUpload.findMany({ where: { accountId } }),
  ]);
  return { files, pending, daily: days.reduce((sum, d) => sum + d.count, 0) };
}

/**
 * Starts a plain upload that sends `first` bytes, then 2 KiB every 250 ms
 * (fast enough not to be cut) until stall() is called, and from then on
 * nothing.
 */
async function hold(t: TestServer, key: string, first = 2 * 1024) {
  const upload = startRawUpload(t.server.url, key, 'stalled.bin');
  await writeBytes(upload.req, first);
  const trickle = setInterval(() => upload.req.destroyed || upload.req.write(Buffer.alloc(2 * 1024)), 250);
  upload.outcome.finally(() => clearInterval(trickle));
  return { ...upload, stall: () => clearInterval(trickle) };
}

/** The servers a noisy-neighbour suite runs against, and what their store holds. */
interface Setup {
  a: TestServer;
  b: TestServer;
  close(): Promise<void>;
  /** The objects stored (keys or paths); a and b may be one server. */
  objects(): Promise<string[]>;
  /** How many multipart uploads are open in the bucket; absent on the local store. */
  openUploads?(): Promise<number>;
}

/** Local store: each server's own data folder. */
const localObjects = (a: TestServer, b: TestServer) => async () => [...new Set([...(await a.objects()), ...(await b.objects())])];

function noisyNeighbour(label: string, start: () => Promise<Setup>) {
  describe(`per-account upload slots: noisy neighbour (${label})`, () => {
    let a: TestServer;
    let b: TestServer;
    let setup: Setup;
    before(async () => {
      setup = await start();
      ({ a, b } = setup);
      await a.plan('noisy', NOISY_PLAN);
    });
    // A failed test must not leave uploads trickling: close() would wait for them.
    afterEach(function () {
      this.stallAll?.();
      this.stallAll = undefined;
    });
    after(() => setup?.close());

    it('when one account holds its maximum of stalled uploads, then another account uploads at once, the noisy one gets 429 until its uploads are cut with 408, and nothing of them is left', async function () {
      const noisy = await a.account('noisy');
      const other = await a.account();
      expect(await leftovers(a, noisy.accountId)).to.deep.include({ pending: 0 });
      // One stalled upload on each instance: the limit is the account's, not the instance's.
      // On S3 each first sends a part and more (S3_PART_SIZE is 5 MiB), so a multipart upload is open when it is cut.
      const first = setup.openUploads ? 5 * MiB + 2 * 1024 : 2 * 1024;
      const held = [await hold(a, noisy.apiKey, first), await hold(b, noisy.apiKey, first)];
      this.stallAll = () => held.forEach((h) => h.stall());
      expect(await eventually(async () => (await leftovers(a, noisy.accountId)).pending, (n) => n === 2)).to.equal(2);
      if (setup.openUploads) expect(await eventually(setup.openUploads, (n) => n === 2)).to.equal(2);

      const started = Date.now();
      const quiet = await uploadFile(b.server.url, other.apiKey, 'other.txt', 'hello');
      expect(quiet.status).to.equal(201);
      expect(Date.now() - started).to.be.below(1500);

      for (const t of [a, b]) {
        const refused = await uploadFile(t.server.url, noisy.apiKey, 'extra.txt', 'x');
        expect(refused.status).to.equal(429);
        expect(refused.body.error.code).to.equal('too_many_uploads');
        expect(refused.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
      }

      for (const h of held) h.stall();
      const outcomes: Outcome[] = await Promise.all(held.map((h) => h.outcome));
      for (const outcome of outcomes) {
        expect(outcome.status).to.equal(408);
        expect(JSON.parse(outcome.body!).error.code).to.equal('upload_too_slow');
      }
      expect(await eventually(() => leftovers(a, noisy.accountId), (l) => l.pending === 0 && l.daily === 0)).to.deep.equal({ files: 0, pending: 0, daily: 0 });
      // The other account's file is the only object (a and b may be one server), and no multipart upload is left open.
      const objects = await setup.objects();
      expect(objects.length).to.equal(await a.server.db.prisma.file.count());
      expect(objects.length).to.equal(1);
      if (setup.openUploads) expect(await setup.openUploads()).to.equal(0);

      const again = await uploadFile(a.server.url, noisy.apiKey, 'again.txt', 'back');
      expect(again.status).to.equal(201);
      const stats = await call(a.url('/api/v1/stats'), { key: noisy.apiKey });
      expect(stats.body.limits.concurrent_uploads).to.equal(2);
      const metrics = await (await fetch(`${a.server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${a.server.adminToken}` } })).text();
      expect(metrics).to.match(/dropstream_upload_refusals_total\{reason="too_many_uploads"\} [1-9]/);
      expect(metrics).to.match(/dropstream_upload_refusals_total\{reason="upload_too_slow"\} [1-9]/);
    });

    it('when an account holds its maximum, then a tus PATCH of the same account gets 429 and a later one goes through', async function () {
      const noisy = await a.account('noisy');
      const created = await create(b.server.url, noisy.apiKey, { length: 4 });
      expect(created.status).to.equal(201);
      const location = created.headers.get('location')!;
      // The upload created above may have a pending record of its own.
      const before = (await leftovers(a, noisy.accountId)).pending;
      const held = [await hold(a, noisy.apiKey), await hold(a, noisy.apiKey)];
      this.stallAll = () => held.forEach((h) => h.stall());
      expect(await eventually(async () => (await leftovers(a, noisy.accountId)).pending, (n) => n === before + 2)).to.equal(before + 2);
      const patch = () =>
        fetch(b.server.url + location, { method: 'PATCH', headers: { Authorization: `Bearer ${noisy.apiKey}`, ...TUS, ...OCTETS, 'Upload-Offset': '0' }, body: 'abcd' });
      const refused = await patch();
      expect(refused.status).to.equal(429);
      expect(((await refused.json()) as any).error.code).to.equal('too_many_uploads');
      for (const h of held) h.stall();
      await Promise.all(held.map((h) => h.outcome));
      const accepted = await patch();
      expect(accepted.status).to.equal(204);
      expect(accepted.headers.get('upload-offset')).to.equal('4');
    });

    it('when a tus PATCH body stalls, then it is cut (upload_too_slow), what arrived is kept and the upload can go on', async () => {
      const { apiKey } = await a.account();
      const created = await create(a.server.url, apiKey, { length: 8192 });
      const location = created.headers.get('location')!;
      const headers = { Authorization: `Bearer ${apiKey}`, ...TUS, ...OCTETS };
      const req = request(a.server.url + location, { method: 'PATCH', headers: { ...headers, 'Upload-Offset': '0', 'Content-Length': '8192' } });
      const answer = new Promise<{ status?: number; body: string; offset?: string }>((resolve) => {
        req.on('response', (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode, body, offset: res.headers['upload-offset'] as string | undefined }));
        });
        req.on('error', () => resolve({ body: '' }));
      });
      req.write(Buffer.alloc(4096, 1));
      const got = await answer;
      req.destroy();
      // The body is cut, not the connection: the client reads the 408 (with
      // the offset stored) before the connection closes.
      expect(got.status).to.equal(408);
      expect(JSON.parse(got.body).error.code).to.equal('upload_too_slow');
      expect(got.offset).to.equal('4096');
      const metrics = await (await fetch(`${a.server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${a.server.adminToken}` } })).text();
      expect(metrics).to.match(/dropstream_upload_refusals_total\{reason="upload_too_slow"\} [1-9]/);
      const head = await fetch(a.server.url + location, { method: 'HEAD', headers: { Authorization: `Bearer ${apiKey}`, ...TUS } });
      expect(head.headers.get('upload-offset')).to.equal('4096');
      const rest = await fetch(a.server.url + location, { method: 'PATCH', headers: { ...headers, 'Upload-Offset': '4096' }, body: Buffer.alloc(4096, 2) });
      expect(rest.status).to.equal(204);
      expect(rest.headers.get('upload-offset')).to.equal('8192');
    });
  });
}

if (redisUrl) {
  noisyNeighbour('two instances, PostgreSQL, Redis, local store', async () => {
    const env = { ...SLOW, REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() };
    const two = await startTwoInstances(env);
    return { ...two, objects: localObjects(two.a, two.b) };
  });
}
for (const backend of backends) {
  // Without Redis the count is per instance: one instance plays both parts.
  noisyNeighbour(`one instance, ${backend}, no Redis, local store`, async () => {
    const t = await startTestServer(backend, SLOW);
    return { a: t, b: t, close: () => t.close(), objects: localObjects(t, t) };
  });
}
// The same on S3: one instance on PGlite (the database is not what differs).
noisyNeighbour('one instance, S3, pglite, no Redis', async () => {
  const s3 = await startTestS3();
  const bucket = s3.bucket('slots');
  const t = await startTestServer('pglite', { ...SLOW, ...s3.env(bucket), S3_PART_SIZE: String(5 * MiB), GC_INTERVAL: '0' });
  const store = new S3ObjectStore(s3.storeOptions(bucket));
  return {
    a: t,
    b: t,
    async close() {
      await t.close();
      await store.close();
      await s3.close();
    },
    objects: async () => ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!),
    openUploads: async () => (await allOpenUploads(store)).length,
  };
});

describe('per-account upload slots: a killed instance (local store)', () => {
  if (!redisUrl) return;
  it(`when a process holds an account's slots for longer than their ${LEASE_MS / 1000} s lease, then it keeps them (it renews the lease); once it is killed, they are free again when the lease runs out and not before`, async function () {
    this.timeout(90_000);
    const db = await createTestDatabase();
    const prefix = freshPrefix();
    const dirs = [await mkdtemp(join(tmpdir(), 'dropstream-slots-')), await mkdtemp(join(tmpdir(), 'dropstream-slots-'))];
    // No slow-body cut here: the uploads must hold their slots until the kill.
    const env = (dir: string) => ({ DATABASE_URL: db.url, DATA_DIR: dir, REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: prefix, UPLOAD_MIN_RATE: '0' });
    const doomed = await startServerProcess(env(dirs[0]!));
    const survivor = await startServerProcess(env(dirs[1]!));
    try {
      await doomed.admin('PUT', '/admin/plans/noisy', NOISY_PLAN);
      const { api_key: key, account_id: accountId } = await doomed.admin('POST', '/admin/accounts', { plan: 'noisy' });
      const held = [startRawUpload(doomed.url, key, 'a.bin'), startRawUpload(doomed.url, key, 'b.bin')];
      await Promise.all(held.map((h) => writeBytes(h.req, 1024)));
      // A fresh process on a loaded machine can take seconds to reach the slot: wait for both to be taken.
      const slots = new Redis(redisUrl!);
      try {
        const taken = () => slots.zcard(`${prefix}:upload-slots:${accountId}`);
        expect(await eventually(taken, (n) => n === 2, 20_000)).to.equal(2);
      } finally {
        slots.disconnect();
      }
      const tryOne = () => uploadFile(survivor.url, key, 'x.txt', 'x').then((r) => r.status);
      expect(await eventually(tryOne, (s) => s === 429)).to.equal(429);
      // Past the lease the uploads still run: only the holder's renewals keep their slots.
      await sleep(LEASE_MS + 2_000);
      expect(await tryOne()).to.equal(429);
      await doomed.kill('SIGKILL');
      const killedAt = Date.now();
      const status = await eventually(tryOne, (s) => s === 201, LEASE_MS + 5_000);
      expect(status).to.equal(201);
      // Renewed every third of a lease, the last renewal came at most that long before the kill;
      // the upper bound leaves a loaded machine's slack for the polling upload.
      expect(Date.now() - killedAt).to.be.within((LEASE_MS * 2) / 3 - 500, LEASE_MS + 2_000);
    } finally {
      await doomed.kill('SIGKILL');
      await survivor.kill('SIGTERM');
      await db.drop();
      for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    }
  });
});
