// The API with objects in S3 (s3rver in this process, or TEST_S3_ENDPOINT): multipart uploads of
// several parts, refusals and hang-ups mid-upload, the store going away, and
// downloads. "Asking the store" goes through a second S3ObjectStore on the
// same bucket, so what a test checks is what the bucket really holds.
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { accountState } from '../helpers/account-state.js';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { BOUNDARY } from '../helpers/multipart.js';
import { eventually, startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { allOpenUploads, startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const PART_SIZE = 5 * MiB;
const BIG_PLAN_LIMIT = 48 * MiB;
const SMALL_PLAN_LIMIT = 12 * MiB;

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

for (const backend of backends) {
  describe(`files in S3 (${backend})`, () => {
    let bucket: string;
    let s3: TestS3;
    let t: TestServer;
    let store: S3ObjectStore;
    let key: string;
    let log: CapturedLog;

    before(async () => {
      s3 = await startTestS3();
      bucket = s3.bucket(`uploads-${backend}`);
      log = captureLog('info');
      t = await startTestServer(backend, { ...s3.env(bucket), S3_PART_SIZE: String(PART_SIZE) }, log.logger);
      store = new S3ObjectStore(s3.storeOptions(bucket, { partSize: PART_SIZE, partsInFlight: 1 }));
      const plan = { api_access: true, requests_per_minute: 10_000, requests_per_day: 100_000, daily_uploads: 10_000 };
      await t.plan('s3-big', { ...plan, max_file_size: BIG_PLAN_LIMIT });
      await t.plan('s3-12mib', { ...plan, max_file_size: SMALL_PLAN_LIMIT });
      ({ apiKey: key } = await t.account('s3-big'));
    });
    after(async () => {
      await store?.close();
      await t?.close();
      await s3?.close();
    });

    /** Every key in the bucket, sorted. */
    async function bucketKeys(): Promise<string[]> {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const page = await store.client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
        keys.push(...(page.Contents ?? []).map((o) => o.Key!));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return keys.sort();
    }

    const openUploadKeys = async () => (await allOpenUploads(store)).map((u) => u.key!).sort();

    /**
     * Waits for the server to finish with a failed upload, then checks it
     * left no object, no open upload and, in the database, no file row, no
     * pending record and no daily slot beyond the account's `rows` earlier uploads.
     */
    async function expectNothingLeft(accountId: number, keysBefore: string[], rows: number) {
      const nothing = { keys: keysBefore, open: [], rows, pending: 0, quota: rows };
      const settled = async () => ({ keys: await bucketKeys(), open: await openUploadKeys(), ...(await accountState(t, accountId)) });
      expect(await eventually(settled, (s) => JSON.stringify(s) === JSON.stringify(nothing), 10_000)).to.deep.equal(nothing);
    }

    describe('plan sizes against what S3 holds', () => {
      const TiB = 1024 * 1024 * MiB;

      it('when a plan would allow files over 5 TiB, then the admin API refuses it with 400 naming the ceiling, and keeps the plan as it was', async () => {
        await t.plan('s3-huge', { api_access: true, max_file_size: 5 * TiB });
        const res = await call(`${t.server.adminUrl}/admin/plans/s3-huge`, {
          method: 'PUT',
          headers: { Authorization: `Bearer ${t.server.adminToken}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ max_file_size: 5 * TiB + 1 }),
        });
        expect(res.status).to.equal(400);
        expect(res.body).to.deep.equal({
          success: false,
          error: { code: 'invalid_request', message: `max_file_size: the object store holds at most ${5 * TiB} bytes in one file` },
        });
        const { plans } = await t.admin('GET', '/admin/plans');
        expect(plans.find((p: { name: string }) => p.name === 's3-huge').max_file_size).to.equal(5 * TiB);
      });
    });

    describe('a 40 MiB file', () => {
      const content = randomBytes(40 * MiB);
      let keysBefore: string[];
      let keysAfter: string[];
      let openAfter: string[];
      let res: Awaited<ReturnType<typeof uploadFile>>;

      before(async () => {
        keysBefore = await bucketKeys();
        res = await uploadFile(t.server.url, key, 'forty.bin', content);
        keysAfter = await bucketKeys();
        openAfter = await openUploadKeys();
      });

      const downloadCount = async () =>
        (await call(t.url(`/api/v1/files/${res.body.file_id}`), { key })).body.file.download_count as number;

      it('when it is uploaded in several parts, then 201, exactly one new object of its size and no open multipart upload', async () => {
        expect(res.status).to.equal(201);
        expect(res.body).to.include({ success: true, size: content.length, filename: 'forty.bin' });
        const added = keysAfter.filter((k) => !keysBefore.includes(k));
        expect(added).to.have.length(1);
        expect(keysAfter).to.have.length(keysBefore.length + 1);
        expect(await store.head(added[0]!)).to.deep.equal({ size: content.length });
        expect(openAfter).to.deep.equal([]);
      });

      it('when its public link is fetched, then every byte comes back', async () => {
        const download = await fetch(t.url(res.body.public_link));
        expect(download.status).to.equal(200);
        expect(download.headers.get('content-length')).to.equal(String(content.length));
        const body = Buffer.from(await download.arrayBuffer());
        expect(body.length).to.equal(content.length);
        expect(sha(body)).to.equal(sha(content));
      });

      it('when a range across a part boundary is asked for, then 206 with exactly those bytes', async () => {
        const start = PART_SIZE - 10;
        const end = 2 * PART_SIZE + 9;
        const ranged = await fetch(t.url(res.body.public_link), { headers: { Range: `bytes=${start}-${end}` } });
        expect(ranged.status).to.equal(206);
        expect(ranged.headers.get('content-range')).to.equal(`bytes ${start}-${end}/${content.length}`);
        expect(ranged.headers.get('content-length')).to.equal(String(end - start + 1));
        expect(Buffer.from(await ranged.arrayBuffer()).equals(content.subarray(start, end + 1))).to.equal(true);

        const tail = await fetch(t.url(res.body.public_link), { headers: { Range: 'bytes=-7' } });
        expect(tail.status).to.equal(206);
        expect(Buffer.from(await tail.arrayBuffer()).equals(content.subarray(-7))).to.equal(true);
      });

      it('when HEAD is sent, then Content-Length is the size and there is no body', async () => {
        const head = await fetch(t.url(res.body.public_link), { method: 'HEAD' });
        expect(head.status).to.equal(200);
        expect(head.headers.get('content-length')).to.equal(String(content.length));
        expect(await head.text()).to.equal('');
      });

      it('when the client hangs up mid-download, then it is not counted and the next download is served and counted', async () => {
        const before = await downloadCount();
        const mark = log.requests().length;
        let received = 0;
        await new Promise<void>((resolve) => {
          const req = request(t.url(res.body.public_link), (response) => {
            response.on('data', (chunk: Buffer) => {
              received += chunk.length;
              if (received >= MiB) {
                req.destroy();
                resolve();
              }
            });
          });
          req.on('error', () => resolve());
          req.end();
        });
        expect(received).to.be.within(MiB, content.length - 1);
        // Its log line is the request's last act: once there, a count would have been.
        expect((await log.requestsAfter(mark, '/download/:token')).map((l) => l.status)).to.deep.equal([499]);
        expect(await downloadCount()).to.equal(before);

        const next = await fetch(t.url(res.body.public_link));
        expect(next.status).to.equal(200);
        expect(sha(Buffer.from(await next.arrayBuffer()))).to.equal(sha(content));
        expect(await eventually(downloadCount, (n) => n === before + 1)).to.equal(before + 1);
      });
    });

    describe('the plan limit (12 MiB, parts of 5 MiB)', () => {
      let smallKey: string;
      let smallId: number;
      before(async () => {
        ({ apiKey: smallKey, accountId: smallId } = await t.account('s3-12mib'));
      });

      it('when the file is exactly the limit, then 201 and the object holds every byte', async () => {
        const keysBefore = await bucketKeys();
        const content = randomBytes(SMALL_PLAN_LIMIT);
        const res = await uploadFile(t.server.url, smallKey, 'exact.bin', content);
        expect(res.status).to.equal(201);
        expect(res.body.size).to.equal(SMALL_PLAN_LIMIT);
        const added = (await bucketKeys()).filter((k) => !keysBefore.includes(k));
        expect(added).to.have.length(1);
        expect(await store.head(added[0]!)).to.deep.equal({ size: SMALL_PLAN_LIMIT });
        expect(await openUploadKeys()).to.deep.equal([]);
      });

      it('when the file is one byte over, after two parts went up, then 403 file_too_large and nothing remains', async () => {
        const keysBefore = await bucketKeys();
        const rowsBefore = (await accountState(t, smallId)).rows;
        const res = await uploadFile(t.server.url, smallKey, 'over.bin', randomBytes(SMALL_PLAN_LIMIT + 1));
        expect(res.status).to.equal(403);
        expect(res.body).to.deep.equal({
          success: false,
          error: { code: 'file_too_large', message: `The file exceeds the plan's maximum file size of ${SMALL_PLAN_LIMIT} bytes` },
        });
        await expectNothingLeft(smallId, keysBefore, rowsBefore);
      });
    });

    describe('failures mid-upload', () => {
      it('when the client hangs up after more than one part was sent, then no row, no object and no open multipart upload remain', async () => {
        const { apiKey, accountId } = await t.account('s3-big');
        const keysBefore = await bucketKeys();
        const { req, outcome } = startRawUpload(t.server.url, apiKey, 'cut.bin');
        expect(await writeBytes(req, 11 * MiB)).to.equal(11 * MiB);
        // The multipart upload really started before we leave.
        expect(await eventually(openUploadKeys, (open) => open.length === 1)).to.have.length(1);
        req.destroy();
        expect((await outcome).status).to.equal(undefined);
        await expectNothingLeft(accountId, keysBefore, 0);
      });

      it('when the store stops mid-upload, then 503 or a closed connection, no row and no object, a pending record for the stranded upload; once it is back, uploads work and gc aborts it', async () => {
        const { apiKey, accountId } = await t.account('s3-big');
        const keysBefore = await bucketKeys();
        const { req, outcome } = startRawUpload(t.server.url, apiKey, 'stranded.bin');
        await writeBytes(req, 6 * MiB);
        const open = await eventually(openUploadKeys, (keys) => keys.length === 1);
        expect(open).to.have.length(1);
        const strandedKey = open[0]!;
        await s3.stop();

        let answered = false;
        void outcome.then(() => (answered = true));
        // Keep sending, as a client that knows nothing of the store would, until answered or 30 MiB on.
        await writeBytes(req, 30 * MiB, () => answered);
        if (!answered && !req.destroyed) req.end(`\r\n--${BOUNDARY}--\r\n`);
        const result = await outcome;
        await s3.start();

        expect(result.status ?? 'connection closed', result.body).to.be.oneOf([503, 'connection closed']);
        if (result.status !== undefined) expect(JSON.parse(result.body!).error.code).to.equal('store_unavailable');
        // No row; the slot came back; the record that promises the clean-up is there, with the upload id.
        expect(await accountState(t, accountId)).to.deep.equal({ rows: 0, pending: 0, quota: 0 });
        const stranded = await t.server.db.prisma.pendingObject.findUnique({ where: { storageKey: strandedKey } });
        expect(stranded, 'pending record of the stranded upload').to.not.equal(null);
        expect(stranded!.uploadId).to.be.a('string').and.not.equal('');
        expect(await bucketKeys()).to.deep.equal(keysBefore);
        expect(await store.head(strandedKey)).to.equal(undefined);

        const content = randomBytes(300_000);
        const ok = await uploadFile(t.server.url, apiKey, 'after.bin', content);
        expect(ok.status).to.equal(201);
        const back = await fetch(t.url(ok.body.public_link));
        expect(sha(Buffer.from(await back.arrayBuffer()))).to.equal(sha(content));
        expect(await accountState(t, accountId)).to.deep.equal({ rows: 1, pending: 0, quota: 1 });
        const keysAfter = await bucketKeys();
        expect(keysAfter).to.have.length(keysBefore.length + 1);
        expect(keysAfter.filter((k) => !keysBefore.includes(k))).to.have.length(1);

        // The abort could not reach the stopped store, so the store still holds
        // the failed upload, and nothing else is open.
        expect(await openUploadKeys()).to.deep.equal([strandedKey]);
        // With the store back, the sweep keeps the record's promise.
        expect(await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 1, failed: 0 });
        expect(await openUploadKeys()).to.deep.equal([]);
        // The record stays, holding nothing, until the stopped store can no longer apply a write it
        // received before it stopped (STORE_LATE_WRITE_WINDOW); then the sweep removes the key again.
        const waiting = await t.server.db.prisma.pendingObject.findUniqueOrThrow({ where: { storageKey: strandedKey } });
        expect(waiting).to.deep.include({ accountId: null, requestId: null, reservedBytes: 0n });
        expect(waiting.lateUntil?.getTime()).to.be.above(Date.now());
      });
    });
  });
}
