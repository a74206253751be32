// Uploads straight to the store through a file request's link
// (/r/{token}/uploads/direct, issue 55): the outsider's upload takes one of
// the request's places before anything is signed, reserves the declared size
// under the owner's quota, answers a receipt, and ends with the request.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, ROOMY_PLAN_FIELDS, type TestServer } from '../helpers/server.js';
import { linkPath, newRequest } from '../requests/helpers.js';
import { directClient, MiB, putAll, sha, uploadDirect } from './direct-client.js';

describe('uploads straight to the store through a file request', function () {
  this.timeout(60_000);
  let s3: TestS3;
  let t: TestServer;

  before(async () => {
    s3 = await startTestS3();
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('direct-requests')), S3_DIRECT_UPLOADS: 'true', GC_INTERVAL: '0', REQUEST_LINK_UPLOADS_PER_HOUR: '1000' });
    await t.plan('request-owner', { ...ROOMY_PLAN_FIELDS, max_total_size: 20 * MiB });
  });
  after(async () => {
    await t?.close();
    await s3?.close();
  });

  const through = (request: { upload_link: string }) => directClient(t.url(`${linkPath(request)}/uploads/direct`));

  it('when an outsider sends a file through the link, then it is the owner\'s file, the answer a receipt, and the request counts it', async () => {
    const { apiKey } = await t.account();
    const request = await newRequest(t, apiKey, { max_files: 2 });
    const data = randomBytes(6 * MiB);
    // The outsider's options are not theirs to set.
    const done = await uploadDirect(through(request), 'from-outside.bin', data, { part_size: 5 * MiB });
    expect(done.status, done.text).to.equal(201);
    expect(done.body).to.deep.equal({ success: true, filename: 'from-outside.bin', size: data.length });
    const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key: apiKey });
    expect(got.body.request.files_received).to.equal(1);
    const [file] = got.body.files;
    expect(file).to.include({ filename: 'from-outside.bin', size: data.length, request_id: request.request_id });
    expect(sha(Buffer.from(await (await fetch(t.url(file.public_link))).arrayBuffer()))).to.equal(sha(data));
    // The owner's own routes do not reach an upload of the request, nor the other way round.
    const mine = await directClient(t.url('/api/v1/uploads/direct'), apiKey).create({ filename: 'own.bin', size: 10 });
    expect((await through(request).view(mine.body.upload_id)).body.error.code).to.equal('upload_not_found');
  });

  it('when uploads in progress hold every place, then the next create is refused request_full before anything is signed, and an abort gives the place back', async () => {
    const { apiKey } = await t.account('request-owner');
    const request = await newRequest(t, apiKey, { max_files: 2 });
    const a = await through(request).create({ filename: 'a.bin', size: 6 * MiB });
    const b = await through(request).create({ filename: 'b.bin', size: 6 * MiB });
    expect([a.status, b.status]).to.deep.equal([201, 201]);
    const third = await through(request).create({ filename: 'c.bin', size: MiB });
    expect(third.status).to.equal(410);
    expect(third.body.error.code).to.equal('request_full');
    // What they hold is shown to the owner: two uploads, 12 MiB reserved of the 20.
    const shown = (await call(t.url(`/api/v1/requests/${request.request_id}`), { key: apiKey })).body.request;
    expect(shown).to.include({ uploads_in_progress: 2, bytes_held: 12 * MiB });
    expect((await directClient(t.url('/api/v1/uploads/direct'), apiKey).create({ filename: 'own.bin', size: 9 * MiB })).body.error.code).to.equal('storage_quota_exceeded');
    expect((await through(request).abort(a.body.upload_id)).status).to.equal(200);
    expect((await through(request).create({ filename: 'c.bin', size: MiB })).status).to.equal(201);
  });

  it('when an outsider holds as many direct uploads through a link as the owner\'s concurrent_uploads, then the owner can still open their own', async () => {
    await t.plan('two-at-once', { ...ROOMY_PLAN_FIELDS, concurrent_uploads: 2 });
    const { apiKey } = await t.account('two-at-once');
    const request = await newRequest(t, apiKey, { max_files: 5 });
    const held = await Promise.all([1, 2].map((i) => through(request).create({ filename: `held-${i}.bin`, size: MiB })));
    expect(held.map((r) => r.status)).to.deep.equal([201, 201]);
    // The link's own uploads are capped at the same number, within its places.
    expect((await through(request).create({ filename: 'third.bin', size: MiB })).body.error.code).to.equal('too_many_uploads');
    const own = directClient(t.url('/api/v1/uploads/direct'), apiKey);
    const mine = await own.create({ filename: 'mine.bin', size: MiB });
    expect(mine.status, JSON.stringify(mine.body)).to.equal(201);
    for (const r of held) expect((await through(request).abort(r.body.upload_id)).status).to.equal(200);
    expect((await own.abort(mine.body.upload_id)).status).to.equal(200);
  });

  it('when the owner closes the request while an upload is in progress, then its complete is refused and nothing of it is kept', async () => {
    const { apiKey } = await t.account('request-owner');
    const request = await newRequest(t, apiKey, {});
    const data = randomBytes(6 * MiB);
    const created = await through(request).create({ filename: 'late.bin', size: data.length, part_size: 5 * MiB });
    const parts = await putAll(data, 5 * MiB, created.body.part_urls);
    expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: apiKey })).status).to.equal(200);
    // The link is closed: the outsider cannot reach it any more; the owner's quota has its room back at once.
    expect((await through(request).complete(created.body.upload_id, parts)).body.error.code).to.equal('request_not_found');
    expect((await directClient(t.url('/api/v1/uploads/direct'), apiKey).create({ filename: 'own.bin', size: 20 * MiB })).status).to.equal(201);
    const stats = (await call(t.url('/api/v1/stats'), { key: apiKey })).body.stats;
    expect(stats).to.include({ total_files: 0, total_size: 0 });
    // The sweep aborts the closed request's upload (its row expired with the close).
    expect((await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).uploads).to.equal(1);
  });

  it('when an outsider signs parts and completes, then only the creation counts against REQUEST_LINK_UPLOADS_PER_HOUR', async () => {
    const limited = await startTestServer('pglite', { ...s3.env(s3.bucket('direct-requests-limit')), S3_DIRECT_UPLOADS: 'true', REQUEST_LINK_UPLOADS_PER_HOUR: '2' });
    try {
      const { apiKey } = await limited.account();
      const request = await newRequest(limited, apiKey, {});
      const client = directClient(limited.url(`${linkPath(request)}/uploads/direct`));
      const data = randomBytes(6 * MiB);
      const created = await client.create({ filename: 'one.bin', size: data.length, part_size: 5 * MiB });
      expect((await client.sign(created.body.upload_id, [1, 2])).status).to.equal(200);
      expect((await client.sign(created.body.upload_id, [2])).status).to.equal(200);
      expect((await client.complete(created.body.upload_id, await putAll(data, 5 * MiB, created.body.part_urls))).status).to.equal(201);
      expect((await client.create({ filename: 'two.bin', size: 10 })).status).to.equal(201);
      const third = await client.create({ filename: 'three.bin', size: 10 });
      expect(third.status).to.equal(429);
      expect(third.body.error.code).to.equal('request_link_limited');
    } finally {
      await limited.close();
    }
  });
});
