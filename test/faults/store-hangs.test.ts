// A store that accepts connections but never answers (Ceph RGW when full
// hangs writes): a TCP proxy in front of s3rver (or TEST_S3_ENDPOINT) stops
// forwarding. Every store call has a deadline (STORE_CALL_TIMEOUT and
// friends, shortened here), so each request ends with its documented answer,
// frees its upload slot and its tus lease, /readyz says not ready while it
// lasts, and once the store answers again `dropstream gc` leaves nothing
// orphaned.
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { call, uploadFile } from '../helpers/client.js';
import { startHangingProxy, type HangingProxy } from '../helpers/hanging-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, head, patch, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;

describe('faults: the object store accepts connections but never answers', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let proxy: HangingProxy;
  let t: TestServer;
  let store: S3ObjectStore;
  let bucket: string;
  let key: string;
  /** Seconds of STORE_CALL_TIMEOUT: a real store (RGW) on a loaded machine gets more. */
  let callSeconds = 1;
  /** A deadline plus a retry and a loaded machine's slack. */
  let WITHIN_MS = 8_000;
  /** What was written to stderr while the store hung (the SDK's warnings went there before). */
  const stderr: string[] = [];
  const writeStderr = process.stderr.write.bind(process.stderr);

  before(async () => {
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      stderr.push(String(chunk));
      return writeStderr(chunk, ...rest);
    }) as typeof process.stderr.write;
    s3 = await startTestS3();
    if (s3.kind === 'external') {
      callSeconds = 3;
      WITHIN_MS = 15_000;
    }
    bucket = s3.bucket('hangs');
    proxy = await startHangingProxy(s3.endpoint);
    t = await startTestServer('pglite', {
      ...s3.env(bucket),
      S3_ENDPOINT: proxy.endpoint,
      S3_PART_SIZE: String(5 * MiB),
      GC_INTERVAL: '0',
      STORE_CALL_TIMEOUT: String(callSeconds),
      STORE_READ_IDLE_TIMEOUT: String(callSeconds),
      STORE_MIN_RATE: String(4 * MiB),
    });
    store = new S3ObjectStore(s3.storeOptions(bucket));
    ({ apiKey: key } = await t.account());
  });
  afterEach(() => proxy.recover());
  after(async () => {
    process.stderr.write = writeStderr;
    await t?.close();
    await store?.close();
    await proxy?.close();
    await s3?.close();
  });

  const metric = async (pattern: RegExp) => {
    const text = (await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken })).text;
    return Number(pattern.exec(text)?.[1] ?? 0);
  };
  const inFlight = () => metric(/^dropstream_uploads_in_flight (\d+)$/m);
  const timeouts = (operation: string) => metric(new RegExp(`^dropstream_store_timeouts_total\\{operation="${operation}"\\} (\\d+)$`, 'm'));
  const storeErrors = () => metric(/^dropstream_store_errors_total (\d+)$/m);
  const readyz = () => call(t.url('/readyz'));

  /** Runs `work`, failing unless it settles within WITHIN_MS; resolves with its result and how long it took. */
  async function timed<T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      work(),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`not answered within ${WITHIN_MS} ms`)), WITHIN_MS))),
    ]).finally(() => clearTimeout(timer));
    return { result, ms: Date.now() - started };
  }

  /** Polls until /readyz answers `status` (the health window is three call deadlines). */
  async function readyzBecomes(status: number) {
    const deadline = Date.now() + 5_000 + 3 * callSeconds * 1000;
    for (;;) {
      const res = await readyz();
      if (res.status === status || Date.now() > deadline) return res;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('when a plain upload meets the hang, then 503 store_unavailable within its deadline, the slot is free, /readyz says the store is down; once it answers, ready again and the next upload is stored', async () => {
    const errorsBefore = await storeErrors();
    proxy.hang();
    const { result: res } = await timed(() => uploadFile(t.server.url, key, 'hung.bin', randomBytes(MiB)));
    expect(res.status).to.equal(503);
    expect(res.body.error.code).to.equal('store_unavailable');
    expect(await inFlight()).to.equal(0);
    expect(await timeouts('put_object')).to.be.at.least(1);
    expect(await storeErrors()).to.be.above(errorsBefore);
    const notReady = await readyz();
    expect(notReady.status).to.equal(503);
    expect(notReady.body.checks.store).to.equal('down');

    proxy.recover();
    expect((await readyzBecomes(200)).status).to.equal(200);
    const next = await uploadFile(t.server.url, key, 'after.bin', randomBytes(MiB));
    expect(next.status).to.equal(201);
  });

  it('when a multipart upload meets the hang mid-way, then 503 store_unavailable within its deadlines and the slot is free', async () => {
    // 12 MiB in 5 MiB parts: the hang comes once the first part has reached
    // the store and before the last could have.
    const body = randomBytes(12 * MiB);
    const before = proxy.forwarded;
    proxy.hangAfter(6 * MiB);
    const upload = uploadFile(t.server.url, key, 'big-hung.bin', body);
    const { result: res } = await timed(() => upload);
    // The first part's bytes went through and the hang came before the last part's.
    expect(proxy.forwarded - before).to.be.within(6 * MiB, 11 * MiB);
    expect(res.status).to.equal(503);
    expect(res.body.error.code).to.equal('store_unavailable');
    expect(await inFlight()).to.equal(0);
  });

  it('when a tus PATCH meets the hang, then 503 within its deadline and its lease is free: once the store answers, the upload resumes at once (no 409 upload_busy)', async () => {
    const created = await create(t.server.url, key, { length: MiB, filename: 'tus.bin' });
    expect(created.status).to.equal(201);
    const url = uploadUrl(t.server.url, created);
    const body = randomBytes(MiB);
    proxy.hang();
    const { result: res } = await timed(() => patch(url, key, 0, body));
    expect(res.status).to.equal(503);
    expect(res.body.error.code).to.equal('store_unavailable');
    proxy.recover();
    const offset = Number((await head(url, key)).headers.get('upload-offset'));
    const resumed = await patch(url, key, offset, body.subarray(offset));
    expect(resumed.status).to.equal(204);
  });

  it('when a download meets the hang before its first byte, then 503 store_unavailable within its deadline', async () => {
    const file = (await uploadFile(t.server.url, key, 'read.bin', randomBytes(MiB))).body;
    proxy.hang();
    const { result: res } = await timed(() => call(t.url(file.public_link)));
    expect(res.status).to.equal(503);
    expect(res.body.error.code).to.equal('store_unavailable');
    expect(await timeouts('get_object')).to.be.at.least(1);
  });

  it('when a download meets the hang mid-body, then the response is cut within the idle deadline', async () => {
    const content = randomBytes(24 * MiB);
    const file = (await uploadFile(t.server.url, key, 'long-read.bin', content)).body;
    const { result: outcome } = await timed(
      () =>
        new Promise<{ received: number; complete: boolean }>((resolve) => {
          let received = 0;
          const req = request(t.url(file.public_link), (res) => {
            res.once('data', () => proxy.hang());
            res.on('data', (chunk: Buffer) => (received += chunk.length));
            res.on('close', () => resolve({ received, complete: res.complete }));
          });
          req.on('error', () => resolve({ received, complete: false }));
          req.end();
        }),
    );
    expect(outcome.complete).to.equal(false);
    expect(outcome.received).to.be.below(content.length);
  });

  it('when a delete and then a sweep meet the hang, then both answer within their deadlines, and once the store answers `gc` leaves nothing orphaned', async () => {
    const file = (await uploadFile(t.server.url, key, 'delete-me.bin', randomBytes(MiB))).body;
    proxy.hang();
    const { result: deleted } = await timed(() => call(t.url(`/api/v1/files/${file.file_id}`), { method: 'DELETE', key }));
    expect(deleted.status).to.be.oneOf([200, 204]);
    const { result: swept } = await timed(() => t.admin('POST', '/admin/gc', { grace_seconds: 0 }));
    expect(swept.failed).to.be.at.least(1);
    expect(await timeouts('delete_object')).to.be.at.least(1);

    proxy.recover();
    await t.admin('POST', '/admin/gc', { grace_seconds: 0 });
    const files = await t.server.db.prisma.file.findMany({ select: { storageKey: true } });
    const objects = ((await store.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);
    expect(objects.sort()).to.deep.equal(files.map((f) => f.storageKey).sort());
    expect(await allOpenUploads(store)).to.deep.equal([]);
    // What is left of the uploads cut by the hang: records that hold nothing and name no object, kept
    // until the store can no longer apply their cut writes (STORE_LATE_WRITE_WINDOW), then swept.
    for (const record of await t.server.db.prisma.pendingObject.findMany({ where: { reason: { not: 'resumable' } } })) {
      expect(record).to.deep.include({ reason: 'upload', accountId: null, requestId: null, reservedBytes: 0n });
      expect(record.lateUntil?.getTime()).to.be.above(Date.now());
    }
    expect(await inFlight()).to.equal(0);
  });

  it('when all of the above happened, then nothing but JSON reached stderr (no SDK warning outside the log)', () => {
    const lines = stderr.join('').split('\n').filter((l) => l.trim() !== '');
    expect(lines.filter((l) => !l.startsWith('{'))).to.deep.equal([]);
  });
});
