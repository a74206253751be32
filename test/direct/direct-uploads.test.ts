// Uploads straight to the store (issue 55, docs/direct-uploads.md): the
// client PUTs parts to URLs the service signs, and the service keeps every
// rule of an upload. Against s3rver in this process, or the real store of
// TEST_S3_ENDPOINT (CI: Ceph RGW, .ci/rgw-suites.sh). What only a store that
// checks signatures can show (a part of another length refused) is in
// test/real-s3/direct.test.ts.
import { randomBytes } from 'node:crypto';
import { ListMultipartUploadsCommand, ListObjectsV2Command, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { isAbortMultipartUpload, startS3Proxy, type S3Proxy } from '../helpers/s3-proxy.js';
import { testClock } from '../helpers/clock.js';
import { describeWithPostgres } from '../helpers/databases.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, startTwoInstances, ROOMY_PLAN_FIELDS, type TestServer } from '../helpers/server.js';
import { directClient, MiB, putAll, putPart, sha, uploadDirect, type PartUrl } from './direct-client.js';

describe('uploads straight to the store (S3_DIRECT_UPLOADS)', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let t: TestServer;
  let bucket: string;
  let store: S3Client;
  const clock = testClock();

  before(async () => {
    s3 = await startTestS3();
    bucket = s3.bucket('direct');
    store = new S3Client({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials, forcePathStyle: true });
    t = await startTestServer('pglite', { ...s3.env(bucket), S3_DIRECT_UPLOADS: 'true', GC_INTERVAL: '0' }, undefined, { clock });
    await t.plan('direct-small', { ...ROOMY_PLAN_FIELDS, max_total_size: 12 * MiB, concurrent_uploads: 2 });
    await t.plan('direct-large', { ...ROOMY_PLAN_FIELDS, max_file_size: 8 * 1024 * MiB });
  });
  after(async () => {
    store?.destroy();
    await t?.close();
    await s3?.close();
  });

  const api = (key: string) => directClient(t.url('/api/v1/uploads/direct'), key);
  /** The store's open multipart uploads and objects in the bucket, by key. */
  async function inStore(): Promise<{ uploads: string[]; objects: string[] }> {
    const [uploads, objects] = await Promise.all([
      store.send(new ListMultipartUploadsCommand({ Bucket: bucket })),
      store.send(new ListObjectsV2Command({ Bucket: bucket })),
    ]);
    return { uploads: (uploads.Uploads ?? []).map((u) => u.Key!).sort(), objects: (objects.Contents ?? []).map((o) => o.Key!).sort() };
  }
  const stats = async (key: string) => (await call(t.url('/api/v1/stats'), { key })).body.stats as { total_files: number; total_size: number };

  it('when a client probes GET /uploads/direct, then it learns the part bounds and the expiry', async () => {
    const { apiKey } = await t.account();
    const res = await api(apiKey).info();
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ success: true, part_size: 16 * MiB, min_part_size: 5 * MiB, max_part_size: 5 * 1024 * MiB, max_parts: 10_000, url_seconds: 3600, expiry_seconds: 86_400 });
  });

  it('when a 64 MiB file goes up in parts straight to the store, then it is a file with its bytes, counted, downloadable, and nothing else stays in the store', async () => {
    const { apiKey } = await t.account();
    const before = await inStore();
    const uploaded = async () => Number(/^dropstream_uploaded_bytes_total (\d+)$/m.exec((await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken })).text)?.[1] ?? 0);
    const bytesBefore = await uploaded();
    const data = randomBytes(64 * MiB);
    const created = await api(apiKey).create({ filename: 'big.bin', size: data.length });
    expect(created.status).to.equal(201);
    expect(created.body).to.include({ filename: 'big.bin', size: data.length, part_size: 16 * MiB, parts: 4 });
    const urls = created.body.part_urls as PartUrl[];
    expect(urls.map((u) => [u.part_number, u.size])).to.deep.equal([1, 2, 3, 4].map((n) => [n, 16 * MiB]));
    // The URLs are the store's, not the service's: the bytes never pass through it.
    expect(new URL(urls[0]!.url).origin).to.equal(new URL(s3.endpoint).origin);
    const done = await api(apiKey).complete(created.body.upload_id, await putAll(data, 16 * MiB, urls));
    expect(done.status, JSON.stringify(done.body)).to.equal(201);
    expect(done.body).to.include({ filename: 'big.bin', size: data.length });
    const download = await fetch(t.url(done.body.public_link));
    expect(download.status).to.equal(200);
    expect(sha(Buffer.from(await download.arrayBuffer()))).to.equal(sha(data));
    expect(await stats(apiKey)).to.include({ total_files: 1, total_size: data.length });
    // Counted as every transport's uploads are.
    expect((await uploaded()) - bytesBefore).to.equal(data.length);
    const after = await inStore();
    expect(after.uploads).to.deep.equal(before.uploads);
    expect(after.objects).to.have.length(before.objects.length + 1);
    // Completed, it is gone as an upload.
    expect((await api(apiKey).view(created.body.upload_id)).body.error.code).to.equal('upload_not_found');
  });

  it('when a declared sha256 matches, then the file is made; when it does not, then 422 and nothing is kept', async () => {
    const { apiKey } = await t.account();
    const data = randomBytes(6 * MiB);
    const good = await uploadDirect(api(apiKey), 'good.bin', data, { part_size: 5 * MiB, sha256: sha(data).toUpperCase() });
    expect(good.status, JSON.stringify(good.body)).to.equal(201);
    const before = await inStore();
    const bad = await uploadDirect(api(apiKey), 'bad.bin', data, { part_size: 5 * MiB, sha256: sha(randomBytes(8)) });
    expect(bad.status).to.equal(422);
    expect(bad.body.error.code).to.equal('direct_upload_mismatch');
    expect(bad.body.error.message).to.match(/SHA-256/);
    expect(await inStore()).to.deep.equal(before);
    expect(await stats(apiKey)).to.include({ total_files: 1, total_size: data.length });
  });

  it('when the stored parts add up to less than declared, or the client sends another ETag, then complete refuses with 422, aborts the upload and gives its room back', async () => {
    const { apiKey } = await t.account('direct-small');
    const before = await inStore();
    const data = randomBytes(11 * MiB);
    const created = await api(apiKey).create({ filename: 'short.bin', size: data.length, part_size: 5 * MiB });
    expect(created.status).to.equal(201);
    const urls = created.body.part_urls as PartUrl[];
    // Two of the three parts.
    const parts = await putAll(data, 5 * MiB, urls.slice(0, 2));
    const res = await api(apiKey).complete(created.body.upload_id, parts);
    expect(res.status).to.equal(422);
    expect(res.body.error.message).to.match(/holds 2 parts/);
    expect(await inStore()).to.deep.equal(before);
    expect((await api(apiKey).view(created.body.upload_id)).status).to.equal(404);
    // The 11 MiB reserved are back: another upload of them fits the 12 MiB quota.
    const again = await api(apiKey).create({ filename: 'etag.bin', size: data.length, part_size: 5 * MiB });
    expect(again.status).to.equal(201);
    const all = await putAll(data, 5 * MiB, again.body.part_urls);
    const wrong = await api(apiKey).complete(again.body.upload_id, all.map((p, i) => (i === 1 ? { ...p, etag: '"0123456789abcdef0123456789abcdef"' } : p)));
    expect(wrong.status).to.equal(422);
    expect(wrong.body.error.message).to.match(/part 2's ETag/);
    expect(await inStore()).to.deep.equal(before);
    expect(await stats(apiKey)).to.include({ total_files: 0, total_size: 0 });
  });

  it('when the store holds a part past the declared ones (sent around the service), then complete refuses with 422 and keeps nothing', async () => {
    const { apiKey } = await t.account();
    const before = await inStore();
    const data = randomBytes(6 * MiB);
    const created = await api(apiKey).create({ filename: 'long.bin', size: data.length, part_size: 5 * MiB });
    const parts = await putAll(data, 5 * MiB, created.body.part_urls);
    // A client holding the store's own credentials adds a third part.
    const upload = (await store.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads?.find((u) => !before.uploads.includes(u.Key!));
    await store.send(new UploadPartCommand({ Bucket: bucket, Key: upload!.Key, UploadId: upload!.UploadId, PartNumber: 3, Body: randomBytes(1000) }));
    const res = await api(apiKey).complete(created.body.upload_id, parts);
    expect(res.status).to.equal(422);
    expect(res.body.error.message).to.match(/holds 3 parts/);
    expect(await inStore()).to.deep.equal(before);
    expect(await stats(apiKey)).to.include({ total_files: 0 });
  });

  it('when the declared size would pass the storage quota, then 403 before anything is signed or started in the store; reservations hold until an abort gives them back', async () => {
    const { apiKey } = await t.account('direct-small');
    const before = await inStore();
    const refused = await api(apiKey).create({ filename: 'huge.bin', size: 13 * MiB });
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal('storage_quota_exceeded');
    expect(await inStore()).to.deep.equal(before);
    const first = await api(apiKey).create({ filename: 'a.bin', size: 7 * MiB });
    expect(first.status).to.equal(201);
    // 7 MiB reserved: 6 more do not fit, whatever was sent yet.
    expect((await api(apiKey).create({ filename: 'b.bin', size: 6 * MiB })).body.error.code).to.equal('storage_quota_exceeded');
    const aborted = await api(apiKey).abort(first.body.upload_id);
    expect(aborted.status).to.equal(200);
    expect(await inStore()).to.deep.equal(before);
    const second = await api(apiKey).create({ filename: 'b.bin', size: 6 * MiB });
    expect(second.status).to.equal(201);
    expect((await api(apiKey).abort(second.body.upload_id)).status).to.equal(200);
    expect((await api(apiKey).abort(second.body.upload_id)).body.error.code).to.equal('upload_not_found');
  });

  it('when an account has its plan\'s concurrent_uploads direct uploads open, then another is refused with 429 until one ends', async () => {
    const { apiKey } = await t.account('direct-small');
    const a = await api(apiKey).create({ filename: 'a.bin', size: MiB });
    const b = await api(apiKey).create({ filename: 'b.bin', size: MiB });
    expect([a.status, b.status]).to.deep.equal([201, 201]);
    const c = await api(apiKey).create({ filename: 'c.bin', size: MiB });
    expect(c.status).to.equal(429);
    expect(c.body.error.code).to.equal('too_many_uploads');
    expect((await api(apiKey).abort(a.body.upload_id)).status).to.equal(200);
    const d = await api(apiKey).create({ filename: 'c.bin', size: MiB });
    expect(d.status).to.equal(201);
    for (const id of [b.body.upload_id, d.body.upload_id]) expect((await api(apiKey).abort(id)).status).to.equal(200);
    // Ten at once: never more than two open, however they interleave.
    const racing = await Promise.all(Array.from({ length: 10 }, (_, i) => api(apiKey).create({ filename: `r${i}.bin`, size: MiB })));
    const made = racing.filter((r) => r.status === 201);
    expect(made.length).to.be.at.most(2);
    expect(racing.filter((r) => r.status !== 201).map((r) => r.body.error.code)).to.satisfy((codes: string[]) => codes.every((c) => c === 'too_many_uploads'));
    for (const r of made) expect((await api(apiKey).abort(r.body.upload_id)).status).to.equal(200);
  });

  it('when a file of more than 5 GiB is declared, then it is planned in parts the store takes, every URL signed for its exact length, and an incomplete one is refused', async () => {
    const { apiKey } = await t.account('direct-large');
    const size = 6 * 1024 * MiB + 12345;
    const created = await api(apiKey).create({ filename: 'six.bin', size });
    expect(created.status).to.equal(201);
    expect(created.body).to.include({ part_size: 16 * MiB, parts: 385 });
    expect(created.body.part_urls).to.have.length(100);
    const last = await api(apiKey).sign(created.body.upload_id, [385, 101]);
    expect(last.body.part_urls.map((p: PartUrl) => [p.part_number, p.size])).to.deep.equal([
      [385, size - 384 * 16 * MiB],
      [101, 16 * MiB],
    ]);
    expect((await api(apiKey).sign(created.body.upload_id, [386])).body.error.code).to.equal('invalid_direct_upload');
    // One real part; the store lists it when asked.
    const part = await putPart(created.body.part_urls[0].url, randomBytes(16 * MiB));
    expect(part.status).to.equal(200);
    const view = await api(apiKey).view(created.body.upload_id);
    expect(view.body.parts_stored).to.deep.equal([{ part_number: 1, size: 16 * MiB, etag: part.etag }]);
    const res = await api(apiKey).complete(created.body.upload_id, [{ part_number: 1, etag: part.etag }]);
    expect(res.status).to.equal(422);
    expect(await stats(apiKey)).to.include({ total_files: 0 });
  });

  it('when a body is wrong, then 400 invalid_direct_upload names the field, and nothing is opened', async () => {
    const { apiKey } = await t.account();
    const before = await inStore();
    for (const [body, pattern] of [
      [{ filename: 'x', size: 0 }, /size/],
      [{ filename: 'x', size: 10, part_size: MiB }, /part_size must be from/],
      [{ filename: 'x', size: 60 * 1024 * MiB, part_size: 5 * MiB }, /more than the store's 10000/],
      [{ filename: 'x', size: 10, sha256: 'abc' }, /sha256/],
      [{ filename: 'x', size: 10, color: 'red' }, /unknown field "color"/],
    ] as const) {
      const res = await api(apiKey).create(body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_direct_upload');
      expect(res.body.error.message).to.match(pattern);
    }
    expect((await api(apiKey).create({ filename: 'a/../', size: 10 })).body.error.code).to.equal('invalid_filename');
    // The upload options answer the codes they answer on every upload and link.
    expect((await api(apiKey).create({ filename: 'x', size: 10, expires_in: 0 })).body.error.code).to.equal('invalid_expires_in');
    expect((await api(apiKey).create({ filename: 'x', size: 10, max_downloads: '3' })).body.error.code).to.equal('invalid_max_downloads');
    expect(await inStore()).to.deep.equal(before);
  });

  it('when an upload is not completed within DIRECT_UPLOAD_EXPIRY, then the sweep aborts it and gives back its slot and room', async () => {
    const { apiKey } = await t.account('direct-small');
    const before = await inStore();
    const created = await api(apiKey).create({ filename: 'late.bin', size: 10 * MiB, part_size: 5 * MiB });
    await putAll(randomBytes(10 * MiB), 5 * MiB, created.body.part_urls);
    // Silent past GC_GRACE, but not expired: the sweep leaves it (its record is the direct upload's, not a plain one's).
    expect((await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).uploads).to.equal(0);
    expect((await inStore()).uploads).to.have.length(before.uploads.length + 1);
    clock.advance(86_400_000 + 1000);
    expect((await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).uploads).to.equal(1);
    expect(await inStore()).to.deep.equal(before);
    expect((await api(apiKey).view(created.body.upload_id)).status).to.equal(404);
    // Its 10 MiB are back under the 12 MiB quota.
    expect((await api(apiKey).create({ filename: 'next.bin', size: 11 * MiB })).status).to.equal(201);
  });
});

describe('uploads straight to the store, turned off', function () {
  this.timeout(60_000);
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite');
  });
  after(async () => {
    await t?.close();
  });

  it('when S3_DIRECT_UPLOADS is off, then the probe and a create answer 404 direct_uploads_off, so a client knows to use tus', async () => {
    const { apiKey } = await t.account();
    const client = directClient(t.url('/api/v1/uploads/direct'), apiKey);
    for (const res of [await client.info(), await client.create({ filename: 'a', size: 1 })]) {
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal('direct_uploads_off');
    }
  });
});

describeWithPostgres('uploads straight to the store across two instances', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let two: Awaited<ReturnType<typeof startTwoInstances>>;
  before(async () => {
    s3 = await startTestS3();
    const env = { ...s3.env(s3.bucket('direct-two')), S3_DIRECT_UPLOADS: 'true' };
    two = await startTwoInstances(env);
  });
  after(async () => {
    await two?.close();
    await s3?.close();
  });

  it('when an upload is created on one instance and completed on the other, then it is one file, and a second complete finds nothing', async () => {
    const { apiKey } = await two.a.account();
    const data = randomBytes(7 * MiB);
    const created = await directClient(two.a.url('/api/v1/uploads/direct'), apiKey).create({ filename: 'two.bin', size: data.length, part_size: 5 * MiB });
    const parts = await putAll(data, 5 * MiB, created.body.part_urls);
    const onB = directClient(two.b.url('/api/v1/uploads/direct'), apiKey);
    const done = await onB.complete(created.body.upload_id, parts);
    expect(done.status, JSON.stringify(done.body)).to.equal(201);
    expect((await onB.complete(created.body.upload_id, parts)).body.error.code).to.equal('upload_not_found');
    const download = await fetch(two.a.url(done.body.public_link));
    expect(sha(Buffer.from(await download.arrayBuffer()))).to.equal(sha(data));
  });
});

describe('uploads straight to the store: a complete that outlived its claim', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let proxy: S3Proxy;
  let t: TestServer;
  const clock = testClock();
  before(async () => {
    s3 = await startTestS3();
    proxy = await startS3Proxy(s3.endpoint);
    // The service talks to the store through the proxy; the parts go to the store itself.
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('direct-late')), S3_ENDPOINT: proxy.endpoint, S3_PUBLIC_ENDPOINT: s3.endpoint, S3_DIRECT_UPLOADS: 'true' }, undefined, { clock });
  });
  after(async () => {
    await t?.close();
    await proxy?.close();
    await s3?.close();
  });

  it('when a complete stalls past its claim and another completes the upload meanwhile, then the late one answers 404 and the file keeps its object', async () => {
    const { apiKey } = await t.account();
    const api = directClient(t.url('/api/v1/uploads/direct'), apiKey);
    const data = randomBytes(6 * MiB);
    const created = await api.create({ filename: 'twice.bin', size: data.length, part_size: 5 * MiB });
    const parts = await putAll(data, 5 * MiB, created.body.part_urls);
    // The first complete's ListParts waits in a store that hangs.
    const isListParts = (req: { method?: string; url?: string }) => req.method === 'GET' && /[?&]uploadId=/.test(req.url ?? '') && !/[?&]partNumber=/.test(req.url ?? '');
    proxy.hold(isListParts);
    const late = api.complete(created.body.upload_id, parts);
    await eventually(async () => proxy.held, (n) => n === 1);
    proxy.hold(undefined);
    // Its claim lapses; a second complete takes the upload and makes the file.
    clock.advance(11 * 60_000);
    const done = await api.complete(created.body.upload_id, parts);
    expect(done.status, JSON.stringify(done.body)).to.equal(201);
    // The first goes on once its store call is cut and tried again: the upload is a file already.
    proxy.drop();
    const first = await late;
    expect(first.status, JSON.stringify(first.body)).to.equal(404);
    expect(first.body.error.code).to.equal('upload_not_found');
    const download = await fetch(t.url(done.body.public_link));
    expect(download.status).to.equal(200);
    expect(sha(Buffer.from(await download.arrayBuffer()))).to.equal(sha(data));
  });

  it('when the store fails an abort, then 503 and the upload is left as it was; once the store answers, the abort goes through and gives its room back', async () => {
    const { apiKey } = await t.account();
    const api = directClient(t.url('/api/v1/uploads/direct'), apiKey);
    const created = await api.create({ filename: 'stuck.bin', size: MiB });
    proxy.fail(isAbortMultipartUpload, 500);
    try {
      const refused = await api.abort(created.body.upload_id);
      expect(refused.status).to.equal(503);
      expect(refused.body.error.code).to.equal('store_unavailable');
    } finally {
      proxy.fail(undefined);
    }
    expect((await api.view(created.body.upload_id)).status).to.equal(200);
    expect((await api.abort(created.body.upload_id)).status).to.equal(200);
    expect((await api.view(created.body.upload_id)).body.error.code).to.equal('upload_not_found');
  });
});
