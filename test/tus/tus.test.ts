// tus 1.0.0 under /api/v1/uploads, driven with raw requests, on both
// databases and both stores (local folder, S3: s3rver or TEST_S3_ENDPOINT): creation,
// PATCH, HEAD, resuming after a cut, limits and quota, termination, expiry,
// conflicts and isolation. The tus-js-client tests are in tus-client.test.ts.
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { testClock } from '../helpers/clock.js';
import { backends } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, download, head, leased, patch, streamingCreate, streamingPatch, terminate, TUS, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
/** A label-less counter's value on the test server. */
const counter = async (t: TestServer, name: string) => Number(/ (\d+)$/m.exec(await t.server.metrics.registry.getSingleMetricAsString(name))?.[1]);

describe('resumable uploads (tus)', () => {
  let s3: TestS3;
  before(async () => {
    s3 = await startTestS3();
  });
  after(async () => {
    await s3.close();
  });

  for (const backend of backends) {
    for (const store of ['local', 's3'] as const) {
      describe(`on ${backend} with the ${store} store`, function () {
        this.timeout(60_000);
        let server: Awaited<ReturnType<typeof tusServer>>;
        let t: TestServer;
        let key: string;
        before(async () => {
          server = await tusServer(backend, store, () => s3);
          t = server.t;
          await t.plan('tus-small', { api_access: true, requests_per_minute: 1000, requests_per_day: 10000, max_file_size: 8 * MiB, daily_uploads: 1000 });
        });
        after(() => server.close());
        beforeEach(async () => {
          ({ apiKey: key } = await t.account());
        });

        it('when OPTIONS is asked, then it advertises the version, the extensions and the plan\'s max_file_size', async () => {
          const { apiKey } = await t.account('tus-small');
          const res = await call(`${t.server.url}/api/v1/uploads`, { method: 'OPTIONS', key: apiKey });
          expect(res.status).to.equal(204);
          expect(res.headers.get('tus-version')).to.equal('1.0.0');
          expect(res.headers.get('tus-extension')?.split(',')).to.include.members(['creation', 'creation-with-upload', 'creation-defer-length', 'termination', 'expiration', 'checksum']);
          expect(res.headers.get('tus-max-size')).to.equal(String(8 * MiB));
          expect(res.headers.get('tus-checksum-algorithm')).to.equal('sha256');
        });

        it('when an upload is created, patched in two pieces and checked with HEAD between, then it becomes a file like a plain upload', async () => {
          const data = randomBytes(7 * MiB + 3);
          const created = await create(t.server.url, key, { length: data.length, filename: 'dir/Résumé.pdf' });
          expect(created.status).to.equal(201);
          expect(created.headers.get('tus-resumable')).to.equal('1.0.0');
          expect(created.headers.get('location')).to.match(/^\/api\/v1\/uploads\/[A-Za-z0-9_-]{22}$/);
          expect(created.headers.get('upload-offset')).to.equal('0');
          expect(Date.parse(created.headers.get('upload-expires')!)).to.be.greaterThan(Date.now());
          const url = uploadUrl(t.server.url, created);
          const first = await patch(url, key, 0, data.subarray(0, 3 * MiB + 1));
          expect(first.status).to.equal(204);
          expect(first.headers.get('upload-offset')).to.equal(String(3 * MiB + 1));
          expect(first.headers.get('dropstream-public-link')).to.equal(null);
          const status = await head(url, key);
          expect(status.status).to.equal(200);
          expect(status.headers.get('upload-offset')).to.equal(String(3 * MiB + 1));
          expect(status.headers.get('upload-length')).to.equal(String(data.length));
          expect(status.headers.get('cache-control')).to.equal('no-store');
          const last = await patch(url, key, 3 * MiB + 1, data.subarray(3 * MiB + 1));
          expect(last.status).to.equal(204);
          expect(last.headers.get('upload-offset')).to.equal(String(data.length));
          const link = last.headers.get('dropstream-public-link')!;
          const fileId = Number(last.headers.get('dropstream-file-id'));
          expect(link).to.match(/^http:\/\/files\.test\/download\/[A-Za-z0-9_-]{22}$/);
          const file = await call(`${t.server.url}/api/v1/files/${fileId}`, { key });
          expect(file.body.file).to.include({ filename: 'Résumé.pdf', size: data.length, public_link: link });
          const got = await download(t, link);
          expect(sha(got)).to.equal(sha(data));
          const res = await fetch(t.url(link), { method: 'HEAD' });
          expect(res.headers.get('etag')).to.equal(`"${sha(data)}"`);
          // The upload URL answers with the file it became.
          const again = await call(url, { key });
          expect(again.body.file).to.deep.equal((await call(`${t.server.url}/api/v1/files/${fileId}`, { key })).body.file);
          expect(again.body.upload).to.include({ offset: data.length, length: data.length, expires_at: null });
          expect((await head(url, key)).headers.get('dropstream-public-link')).to.equal(link);
          expect(await server.leftovers()).to.deep.equal([]);
        });

        it('when the body comes with the creation request (creation-with-upload), then it is stored at once', async () => {
          const data = randomBytes(1000);
          const created = await create(t.server.url, key, { length: data.length, body: data });
          expect(created.status).to.equal(201);
          expect(created.headers.get('upload-offset')).to.equal('1000');
          expect(sha(await download(t, created.headers.get('dropstream-public-link')!))).to.equal(sha(data));
        });

        it('when a deferred-length upload ends with an empty PATCH declaring Upload-Length (as tus-js-client does when a stream ends on a chunk boundary), then it becomes the file', async () => {
          // 6 MiB + 1 with the 5 MiB parts of the S3 tests: a part is stored and a tail of 1 MiB + 1 is left.
          const data = randomBytes(6 * MiB + 1);
          const created = await create(t.server.url, key, {});
          const url = uploadUrl(t.server.url, created);
          expect((await patch(url, key, 0, data)).headers.get('upload-offset')).to.equal(String(data.length));
          const last = await patch(url, key, data.length, Buffer.alloc(0), { 'Upload-Length': String(data.length) });
          expect(last.status).to.equal(204);
          expect(sha(await download(t, last.headers.get('dropstream-public-link')!))).to.equal(sha(data));
          expect(await server.leftovers()).to.deep.equal([]);
        });

        it('when a PATCH is cut mid-body, then HEAD reports exactly what was stored and the next PATCH continues there', async () => {
          const data = randomBytes(9 * MiB);
          const created = await create(t.server.url, key, { length: data.length });
          const url = uploadUrl(t.server.url, created);
          const before = (await server.leftovers()).length;
          const cut = streamingPatch(url, key, 0, data.length);
          await cut.send(data.subarray(0, 6 * MiB + 12_345));
          // Bytes are in the store (a temp file, or on S3 a multipart upload with its first part) before the cut.
          expect(await eventually(async () => (await server.leftovers()).length, (n) => n > before)).to.equal(before + 1);
          cut.cut();
          const offset = Number(
            (await eventually(() => head(url, key), (r) => r.status === 200 && Number(r.headers.get('upload-offset')) > 0)).headers.get('upload-offset'),
          );
          expect(offset).to.be.within(1, 6 * MiB + 12_345);
          // The lease may still be settling; the client retries on 409 as tus-js-client does.
          const rest = await eventually(() => patch(url, key, offset, data.subarray(offset)), (r) => r.status !== 409);
          expect(rest.status).to.equal(204);
          expect(sha(await download(t, rest.headers.get('dropstream-public-link')!))).to.equal(sha(data));
        });

        it('when Upload-Length is over the plan\'s max_file_size, then 403 file_too_large and no daily slot is taken', async () => {
          await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
          const { apiKey } = await t.account('tus-one');
          const res = await create(t.server.url, apiKey, { length: 8 * MiB + 1 });
          expect(res.status).to.equal(403);
          expect(res.body.error.code).to.equal('file_too_large');
          expect(res.headers.get('tus-resumable')).to.equal('1.0.0');
          expect((await create(t.server.url, apiKey, { length: 8 * MiB })).status).to.equal(201);
        });

        it('when a deferred-length upload passes max_file_size, then 403 file_too_large, the upload is gone and its slot is back', async () => {
          await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
          const { apiKey } = await t.account('tus-one');
          const created = await create(t.server.url, apiKey, {});
          expect(created.status).to.equal(201);
          expect(created.headers.get('upload-defer-length')).to.equal('1');
          const url = uploadUrl(t.server.url, created);
          expect((await patch(url, apiKey, 0, randomBytes(6 * MiB))).status).to.equal(204);
          const over = await patch(url, apiKey, 6 * MiB, randomBytes(2 * MiB + 1));
          expect(over.status).to.equal(403);
          expect(over.body.error.code).to.equal('file_too_large');
          expect((await head(url, apiKey)).status).to.equal(404);
          expect(await server.leftovers()).to.deep.equal([]);
          expect((await create(t.server.url, apiKey, { length: 10 })).status).to.equal(201);
        });

        it('when a chunked body (no Content-Length) passes max_file_size, then 403 file_too_large while streaming, the upload is gone and its slot is back', async () => {
          await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
          const { apiKey } = await t.account('tus-one');
          const created = await create(t.server.url, apiKey, {});
          const url = uploadUrl(t.server.url, created);
          const req = streamingPatch(url, apiKey, 0);
          await req.send(randomBytes(8 * MiB + 1));
          req.end();
          const res = await req.response;
          expect(res.status).to.equal(403);
          expect(JSON.parse(res.body!).error.code).to.equal('file_too_large');
          expect((await head(url, apiKey)).status).to.equal(404);
          expect(await server.leftovers()).to.deep.equal([]);
          expect((await create(t.server.url, apiKey, { length: 10 })).status).to.equal(201);
        });

        it('when 16 creations race for a daily quota of 5, then exactly 5 succeed', async () => {
          await t.plan('tus-five', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: MiB, daily_uploads: 5 });
          const { apiKey } = await t.account('tus-five');
          const results = await Promise.all(Array.from({ length: 16 }, () => create(t.server.url, apiKey, { length: 100 })));
          expect(results.filter((r) => r.status === 201)).to.have.length(5);
          expect(results.filter((r) => r.status === 403 && r.body.error.code === 'daily_upload_limit')).to.have.length(11);
        });

        it('when an unfinished upload is terminated, then 204, its bytes are gone and its slot comes back', async () => {
          await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
          const { apiKey } = await t.account('tus-one');
          const url = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 8 * MiB }));
          expect((await patch(url, apiKey, 0, randomBytes(6 * MiB))).status).to.equal(204);
          // The temp file, or on S3 the multipart upload and the tail object with the 1 MiB past its part.
          expect(await server.leftovers()).to.have.length(store === 'local' ? 1 : 2);
          const res = await terminate(url, apiKey);
          expect(res.status).to.equal(204);
          expect((await head(url, apiKey)).status).to.equal(404);
          expect((await terminate(url, apiKey)).status).to.equal(404);
          expect(await server.leftovers()).to.deep.equal([]);
          expect((await create(t.server.url, apiKey, { length: 1 })).status).to.equal(201);
        });

        it('when the client leaves during a creation-with-upload body (it never learnt the URL), then the upload is terminated: its bytes are gone and its slot comes back', async () => {
          await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
          const { apiKey } = await t.account('tus-one');
          const interruptions = () => counter(t, 'dropstream_resumable_interruptions_total');
          const before = await interruptions();
          const stored = (await server.leftovers()).length;
          const req = streamingCreate(t.server.url, apiKey, 8 * MiB, 8 * MiB);
          await req.send(randomBytes(6 * MiB + 7));
          // Bytes are in the store before the client leaves: there is something to remove.
          expect(await eventually(async () => (await server.leftovers()).length, (n) => n > stored)).to.equal(stored + 1);
          req.cut();
          const again = await eventually(() => create(t.server.url, apiKey, { length: 1 }), (r) => r.status === 201);
          expect(again.status).to.equal(201);
          expect(await server.leftovers()).to.deep.equal([]);
          expect(await interruptions()).to.equal(before + 1);
        });

        it('when a deferred-length creation-with-upload body passes max_file_size, then 403 file_too_large: the upload is gone, so no URL to continue', async () => {
          await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
          const { apiKey } = await t.account('tus-one');
          const res = await create(t.server.url, apiKey, { body: randomBytes(8 * MiB + 1) });
          expect(res.status).to.equal(403);
          expect(res.body.error.code).to.equal('file_too_large');
          expect(await server.leftovers()).to.deep.equal([]);
          expect((await create(t.server.url, apiKey, { length: 10 })).status).to.equal(201);
        });

        it('when a finished upload is terminated, then 409 upload_complete and the file stays', async () => {
          const data = randomBytes(10);
          const created = await create(t.server.url, key, { length: 10, body: data });
          const res = await terminate(uploadUrl(t.server.url, created), key);
          expect(res.status).to.equal(409);
          expect(res.body.error.code).to.equal('upload_complete');
          expect(sha(await download(t, created.headers.get('dropstream-public-link')!))).to.equal(sha(data));
        });

        it('when a PATCH comes at the wrong offset, then 409 upload_offset_mismatch with the real offset, and nothing changes', async () => {
          const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: 100 }));
          expect((await patch(url, key, 0, randomBytes(40))).status).to.equal(204);
          const res = await patch(url, key, 30, randomBytes(10));
          expect(res.status).to.equal(409);
          expect(res.body.error.code).to.equal('upload_offset_mismatch');
          expect(res.headers.get('upload-offset')).to.equal('40');
          expect((await head(url, key)).headers.get('upload-offset')).to.equal('40');
        });

        it("when another account PATCHes, HEADs, GETs or DELETEs an upload, then 404 exactly as for a missing one", async () => {
          const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: 100 }));
          const { apiKey: other } = await t.account();
          const missing = `${t.server.url}/api/v1/uploads/${'A'.repeat(22)}`;
          for (const target of [url, missing]) {
            const res = await patch(target, other, 0, randomBytes(10));
            expect(res.status).to.equal(404);
            expect(res.body).to.deep.equal({ success: false, error: { code: 'upload_not_found', message: 'Upload not found' } });
            expect((await head(target, other)).status).to.equal(404);
            expect((await call(target, { key: other })).body).to.deep.equal(res.body);
            expect((await terminate(target, other)).status).to.equal(404);
          }
          expect((await head(url, key)).headers.get('upload-offset')).to.equal('0');
        });

        it('when two PATCHes on one upload run at once, then the newer one wins: the first stops and keeps what it stored, and the bytes are never interleaved', async () => {
          const data = randomBytes(6 * MiB);
          const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: data.length }));
          const slow = streamingPatch(url, key, 0, data.length);
          await slow.send(data.subarray(0, MiB));
          await leased(t, url);
          // From 0: the first stored some of its body when it stopped, so the offset no longer matches.
          const second = await patch(url, key, 0, data);
          expect(second.status).to.equal(409);
          expect(second.body.error.code).to.equal('upload_offset_mismatch');
          const stored = Number(second.headers.get('upload-offset'));
          expect(stored).to.be.within(1, MiB);
          const first = await slow.response;
          expect(first.status).to.not.equal(204);
          const done = await patch(url, key, stored, data.subarray(stored));
          expect(done.status).to.equal(204);
          expect(sha(await download(t, done.headers.get('dropstream-public-link')!))).to.equal(sha(data));
        });

        it('when Upload-Checksum matches, then the PATCH is kept; when it does not, then 460 and nothing of it is kept', async () => {
          const data = randomBytes(3000);
          const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: data.length }));
          const digest = (b: Buffer) => `sha256 ${createHash('sha256').update(b).digest('base64')}`;
          const good = await patch(url, key, 0, data.subarray(0, 1000), { 'Upload-Checksum': digest(data.subarray(0, 1000)) });
          expect(good.status).to.equal(204);
          const bad = await patch(url, key, 1000, data.subarray(1000), { 'Upload-Checksum': digest(randomBytes(5)) });
          expect(bad.status).to.equal(460);
          expect(bad.body.error.code).to.equal('checksum_mismatch');
          expect((await head(url, key)).headers.get('upload-offset')).to.equal('1000');
          const unsupported = await patch(url, key, 1000, data.subarray(1000), { 'Upload-Checksum': 'md5 AAAA' });
          expect(unsupported.status).to.equal(400);
          const rest = await patch(url, key, 1000, data.subarray(1000), { 'Upload-Checksum': digest(data.subarray(1000)) });
          expect(rest.status).to.equal(204);
          expect(sha(await download(t, rest.headers.get('dropstream-public-link')!))).to.equal(sha(data));
        });

        it('when the tus headers are missing or wrong, then clear 4xx errors in our JSON shape', async () => {
          const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: 100 }));
          const noVersion = await call(url, { method: 'PATCH', key, headers: { 'Content-Type': 'application/offset+octet-stream', 'Upload-Offset': '0' }, body: 'x' });
          expect(noVersion.status).to.equal(412);
          expect(noVersion.headers.get('tus-version')).to.equal('1.0.0');
          expect(noVersion.body.error.code).to.equal('tus_version_unsupported');
          // Without the header it is most likely not a tus client: the answer says where a plain upload goes.
          expect(noVersion.body.error.message).to.equal(
            'Tus-Resumable: 1.0.0 is missing: /api/v1/uploads speaks tus (resumable uploads, see the README or use a tus client); ' +
              'a plain upload is POST /api/v1/files/upload with multipart/form-data, curl -F "file=@report.pdf"',
          );
          const oldVersion = await call(url, { method: 'PATCH', key, headers: { 'Tus-Resumable': '0.2.2', 'Content-Type': 'application/offset+octet-stream', 'Upload-Offset': '0' }, body: 'x' });
          expect([oldVersion.status, oldVersion.body.error.message]).to.deep.equal([412, 'Tus-Resumable must be 1.0.0']);
          const wrongType = await call(url, { method: 'PATCH', key, headers: { ...TUS, 'Content-Type': 'text/plain', 'Upload-Offset': '0' }, body: 'x' });
          expect(wrongType.status).to.equal(415);
          const noOffset = await call(url, { method: 'PATCH', key, headers: { ...TUS, 'Content-Type': 'application/offset+octet-stream' }, body: 'x' });
          expect(noOffset.body.error.code).to.equal('invalid_upload_offset');
          const both = await create(t.server.url, key, { length: 5, headers: { 'Upload-Defer-Length': '1' } });
          expect(both.body.error.code).to.equal('invalid_upload_length');
          const badMeta = await create(t.server.url, key, { length: 5, headers: { 'Upload-Metadata': 'filename !!!' } });
          expect(badMeta.body.error.code).to.equal('invalid_upload_metadata');
          const noName = await create(t.server.url, key, { length: 5, headers: { 'Upload-Metadata': '' } });
          expect(noName.body.error.code).to.equal('invalid_filename');
          const past = await patch(url, key, 0, randomBytes(101));
          expect(past.status).to.equal(400);
          expect(past.body.error.code).to.equal('upload_length_exceeded');
          const noKey = await call(url, { method: 'HEAD', headers: TUS });
          expect(noKey.status).to.equal(401);
          expect(noKey.headers.get('tus-resumable')).to.equal('1.0.0');
        });
      });
    }

    describe(`expiry on ${backend}`, function () {
      this.timeout(30_000);
      for (const store of ['local', 's3'] as const) {
        it(`when an unfinished upload expires (${store} store), then the sweep removes its bytes and records and gives its slot back`, async () => {
          // The clock is moved past the expiry once the PATCH has ended, so a loaded machine cannot make it expire sooner.
          const clock = testClock();
          const server = await tusServer(backend, store, () => s3, { RESUMABLE_EXPIRY: '60', GC_INTERVAL: '0' }, { clock });
          try {
            const { t } = server;
            await t.plan('tus-one', { api_access: true, requests_per_minute: 1000, requests_per_day: 1000, max_file_size: 8 * MiB, daily_uploads: 1 });
            const { apiKey } = await t.account('tus-one');
            const url = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 8 * MiB }));
            expect((await patch(url, apiKey, 0, randomBytes(6 * MiB))).status).to.equal(204);
            // What the sweep must remove: the temp file, or on S3 the multipart upload and the tail object with the 1 MiB past its part.
            expect(await server.leftovers()).to.have.length(store === 'local' ? 1 : 2);
            expect((await create(t.server.url, apiKey, { length: 1 })).body.error.code).to.equal('daily_upload_limit');
            clock.advance(61_000);
            expect((await head(url, apiKey)).status).to.equal(404);
            expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 1, failed: 0 });
            expect(await server.leftovers()).to.deep.equal([]);
            expect(await t.server.db.prisma.pendingObject.count()).to.equal(0);
            expect(await t.server.db.prisma.resumableUpload.count()).to.equal(0);
            expect((await create(t.server.url, apiKey, { length: 1 })).status).to.equal(201);
            // A second sweep finds nothing to give back twice.
            expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 0 });
          } finally {
            await server.close();
          }
        });
      }
    });
  }
});
