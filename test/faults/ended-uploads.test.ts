// Uploads known to be dead (issue 51): a soak saw twelve records of uploads
// whose request had ended (their clean-up's DeleteObject timed out while the
// store hung) hold places of a file request, for GC_GRACE (an hour), with
// most of their objects still in the bucket. An upload that ended gives back
// its place, its daily slot and its reserved bytes in the statement that
// marks it ended, and the sweep retries its clean-up, backing off, as soon
// as the store answers, whatever GC_GRACE says.
//
// The hang here: a proxy in front of s3rver (or TEST_S3_ENDPOINT) passes
// each PutObject to the store but holds its answer, and takes in each
// DeleteObject without passing or answering it.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { Sweeper } from '../../src/files/sweeper.js';
import { newStorageKey } from '../../src/files/record.js';
import { UploadLedger } from '../../src/ledger/ledger.js';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { eventually } from '../helpers/raw-upload.js';
import { isDeleteObject, isPutObject, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { newRequest, sendFile } from '../requests/helpers.js';

const MiB = 1024 * 1024;

describe('faults: uploads through a file request fail while the store hangs', function () {
  this.timeout(90_000);
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let store: S3ObjectStore;
  let bucket: string;
  /** GC_INTERVAL: the schedule sweeps every second here. */
  const intervalSeconds = 1;

  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('ended');
    proxy = await startS3Proxy(s3.endpoint);
    t = await startTestServer('pglite', {
      ...s3.env(bucket),
      S3_ENDPOINT: proxy.endpoint,
      GC_INTERVAL: String(intervalSeconds),
      STORE_CALL_TIMEOUT: s3.kind === 'external' ? '3' : '1',
      STORE_MIN_RATE: String(4 * MiB),
      STORE_LATE_WRITE_WINDOW: '1',
    });
    store = new S3ObjectStore(s3.storeOptions(bucket));
    // Two uploads a day, 1 MiB stored at most: what the failed uploads held shows in the next ones.
    await t.plan('two-a-day', {
      api_access: true,
      requests_per_minute: 100_000,
      requests_per_day: 100_000,
      max_file_size: MiB,
      daily_uploads: 2,
      max_total_size: MiB,
    });
  });
  after(async () => {
    proxy?.delay(undefined);
    proxy?.drop();
    await t?.close();
    await store?.close();
    await proxy?.close();
    await s3?.close();
  });

  const bucketKeys = async () => ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);

  it('when two uploads through a request fail in the hang, then its places, the daily slots and the reserved bytes are back at once, and once the store answers the objects are gone within a sweep or two', async () => {
    const owner = await t.account('two-a-day');
    const request = await newRequest(t, owner.apiKey, { max_files: 2 });
    const { prisma } = t.server.db;

    // The store hangs: writes are applied but never answered, deletes never reach it.
    proxy.delay(isPutObject, 60_000);
    proxy.hold(isDeleteObject);
    const failed = await Promise.all(['a.bin', 'b.bin'].map((name) => sendFile(t.server.url, request, name, randomBytes(400 * 1024))));
    expect(failed.map((r) => [r.status, r.body?.error?.code])).to.deep.equal([
      [503, 'store_unavailable'],
      [503, 'store_unavailable'],
    ]);
    // The writes reached the store; their clean-up could not.
    expect(await eventually(bucketKeys, (keys) => keys.length === 2)).to.have.length(2);
    const ended = await prisma.pendingObject.findMany();
    expect(ended).to.have.length(2);

    // While the store still hangs: the records hold nothing any more.
    for (const record of ended) {
      expect(record).to.deep.include({ accountId: null, quotaDay: null, reservedBytes: 0n, requestId: null });
      expect(record.endedAt).to.be.instanceOf(Date);
    }
    expect(await prisma.pendingObject.count({ where: { requestId: request.request_id } }), 'places of the request').to.equal(0);
    const slots = await prisma.dailyUpload.aggregate({ where: { accountId: owner.accountId }, _sum: { count: true } });
    expect(slots._sum.count ?? 0, 'daily slots').to.equal(0);
    const account = await prisma.account.findUniqueOrThrow({ where: { id: owner.accountId } });
    expect(account.reservedBytes, 'reserved bytes').to.equal(0n);

    // The store answers again: the scheduled sweeps remove the objects, GC_GRACE (an hour) notwithstanding.
    proxy.delay(undefined);
    proxy.hold(undefined);
    proxy.drop();
    const answering = Date.now();
    const left = await eventually(async () => (await bucketKeys()).length + (await prisma.pendingObject.count()), (n) => n === 0, 20_000);
    const tookMs = Date.now() - answering;
    expect(left, 'objects and records left').to.equal(0);
    // A sweep starts every second; a record tried during the hang waits out its back-off (4 intervals at most) unless another's retry succeeds first.
    expect(tookMs).to.be.below(15_000);

    // The places and the day's slots are the request's and the owner's again.
    const again = await Promise.all(['c.bin', 'd.bin'].map((name) => sendFile(t.server.url, request, name, randomBytes(400 * 1024))));
    expect(again.map((r) => r.status), JSON.stringify(again.map((r) => r.body))).to.deep.equal([201, 201]);
    expect((await bucketKeys()).sort()).to.deep.equal((await prisma.file.findMany()).map((f) => f.storageKey).sort());
  });
});

describe('sweep: the clean-up of ended uploads while the store does not answer', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  let store: S3ObjectStore;
  let ledger: UploadLedger;
  let now: Date;
  let sweeper: Sweeper;

  before(async () => {
    s3 = await startTestS3();
    const bucket = s3.bucket('backoff');
    proxy = await startS3Proxy(s3.endpoint);
    // Only the database is the server's: the sweep below is built here, on a store behind the proxy and a clock of the test's.
    t = await startTestServer('pglite', { GC_INTERVAL: '0' });
    store = new S3ObjectStore(s3.storeOptions(bucket, { endpoint: proxy.endpoint }));
    await store.ensureBucket();
    ledger = new UploadLedger(t.server.db.prisma);
    now = new Date();
    sweeper = new Sweeper(t.server.db.prisma, store, ledger, undefined, { clock: () => now, retryMs: { first: 60_000, max: 600_000 } });
  });
  after(async () => {
    await t?.close();
    await store?.close();
    await proxy?.close();
    await s3?.close();
  });

  it('when the store refuses every delete, then each sweep makes one call for them and backs that upload off; the first sweep whose call succeeds removes them all', async () => {
    const { accountId } = await t.account();
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const key = newStorageKey();
      await ledger.recordUpload(key, accountId, now.toISOString().slice(0, 10));
      await store.put(key, Readable.from([randomBytes(100)]));
      await ledger.endUpload(key, { now });
      keys.push(key);
    }
    const attempts = async () => (await t.server.db.prisma.pendingObject.findMany({ orderBy: { storageKey: 'asc' } })).map((r) => r.attempts);

    // The deletes each sweep tried (the SDK retries a cut call itself, so each counts once, by its key).
    let tried = new Set<string>();
    const sweepTrying = async () => {
      tried = new Set();
      const result = await sweeper.sweep(3600);
      return { result, tried: tried.size };
    };
    proxy.cut((req) => isDeleteObject(req) && Boolean(tried.add(req.url!)));
    const probed = new Set<string>();
    for (let sweep = 1; sweep <= 3; sweep++) {
      const { result, tried: calls } = await sweepTrying();
      expect(result).to.deep.include({ uploads: 0, failed: 1 });
      expect(calls, `deletes tried by sweep ${sweep}`).to.equal(1);
      for (const url of tried) probed.add(url);
    }
    // Each took its turn, and waits a minute now: no call at all.
    expect(probed.size).to.equal(3);
    expect(await attempts()).to.deep.equal([1, 1, 1]);
    expect(await sweepTrying()).to.deep.include({ result: { expired: 0, uploads: 0, deletes: 0, strays: 0, orphans: 0, failed: 0 }, tried: 0 });

    // A minute on, all are due; the first fails once more and waits two minutes.
    now = new Date(now.getTime() + 60_000);
    expect(await sweepTrying()).to.deep.include({ tried: 1 });
    expect((await attempts()).sort()).to.deep.equal([1, 1, 2]);

    // The store answers: the next due retry succeeds, and that sweep removes every one, backing off or not.
    proxy.cut(undefined);
    now = new Date(now.getTime() + 60_000);
    expect(await sweeper.sweep(3600)).to.deep.include({ uploads: 3, failed: 0 });
    expect(await t.server.db.prisma.pendingObject.count()).to.equal(0);
    for (const key of keys) expect(await store.head(key)).to.equal(undefined);
  });
});
