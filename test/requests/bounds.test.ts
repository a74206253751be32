// An outsider holding a request link must not drain the owner's plan (issue
// 50, 4). With a request made with defaults, 20 empty tus creations took all
// 20 of the owner's daily uploads, two unfinished 5 MiB uploads filled a
// 10 MiB quota while /stats said 18 bytes were used, and all of it lasted
// 24 h. Now a request made without limits takes 10 files and lasts 7 days,
// the owner sees what uploads in progress hold, and closing a request gives
// it all back at once.
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { metadata, OCTETS, TUS } from '../helpers/tus.js';
import { linkPath, newRequest } from './helpers.js';

const MiB = 1024 * 1024;
const PLAN = { api_access: true, requests_per_minute: 100_000, requests_per_day: 1_000_000, max_file_size: 64 * MiB };
const WEEK = 7 * 86_400;

/** A wire date (`YYYY-MM-DD HH:MM:SS`, UTC) as milliseconds. */
const wireTime = (date: string) => Date.parse(`${date.replace(' ', 'T')}Z`);

for (const backend of backends) {
  describe(`file requests: what an outsider can hold of the owner's plan (${backend})`, function () {
    this.timeout(60_000);
    let t: BuiltTestServer;
    before(async () => {
      t = await buildTestServer(backend, { GC_INTERVAL: '0', REQUEST_LINK_UPLOADS_PER_HOUR: '1000' });
      await t.plan('twenty-a-day', { ...PLAN, daily_uploads: 20 });
      await t.plan('ten-mib', { ...PLAN, daily_uploads: 1000, max_total_size: 10 * MiB });
    });
    after(async () => t?.close());

    const createThroughLink = (request: { upload_link: string }, headers: Record<string, string>) =>
      call(t.url(`${linkPath(request)}/uploads`), { method: 'POST', headers: { ...TUS, 'Upload-Metadata': metadata({ filename: 'x.bin' }), ...headers } });

    it('when a request is made without limits, then it takes 10 files and expires in 7 days; null asks for no limit, and a larger number is honoured', async () => {
      const { apiKey } = await t.account();
      const before = Date.now();
      const made = await newRequest(t, apiKey, {});
      expect(made.max_files).to.equal(10);
      expect(wireTime(made.expires_at)).to.be.within(before - 1000 + WEEK * 1000, Date.now() + 1000 + WEEK * 1000);
      const unlimited = await newRequest(t, apiKey, { max_files: null, expires_in: null });
      expect(unlimited).to.include({ max_files: null, expires_at: null });
      const larger = await newRequest(t, apiKey, { max_files: 500, expires_in: 30 * 86_400 });
      expect(larger.max_files).to.equal(500);
      // Listed and got as made.
      const got = await call(t.url(`/api/v1/requests/${unlimited.request_id}`), { key: apiKey });
      expect(got.body.request).to.include({ max_files: null, expires_at: null });
    });

    it('when an outsider makes 20 empty tus creations through a request made with defaults, then 10 are refused request_full before any upload is made, and the owner keeps uploads of the day', async () => {
      const { apiKey } = await t.account('twenty-a-day');
      const request = await newRequest(t, apiKey, {});
      const created = async () => Number(/ (\d+)$/m.exec(await t.built.metrics.registry.getSingleMetricAsString('dropstream_resumable_uploads_created_total'))?.[1] ?? 0);
      const createdBefore = await created();
      const answers = [];
      for (let i = 0; i < 20; i++) answers.push(await createThroughLink(request, { 'Upload-Defer-Length': '1' }));
      expect(answers.map((a) => a.status)).to.deep.equal([...Array(10).fill(201), ...Array(10).fill(410)]);
      // The place is taken as the upload opens (src/intake), before its row and store upload exist: a refused one made neither.
      expect((await created()) - createdBefore, 'uploads made').to.equal(10);
      expect(answers[19]!.body.error.code).to.equal('request_full');
      expect((await uploadFile(t.baseUrl, apiKey, 'mine.txt', 'mine')).status).to.equal(201);
      // The owner sees them: 10 uploads in progress, nothing stored yet.
      const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key: apiKey });
      expect(got.body.request).to.include({ uploads_in_progress: 10, bytes_held: 0 });
    });

    it('when two unfinished 5 MiB uploads through a request hold a 10 MiB quota, then /stats shows the reserved bytes beside the stored ones, the request shows them held, and closing it gives them back at once', async () => {
      const { apiKey, accountId } = await t.account('ten-mib');
      const request = await newRequest(t, apiKey, {});
      const sent = 5 * MiB - 4096;
      for (let i = 0; i < 2; i++) {
        const created = await createThroughLink(request, { 'Upload-Length': String(5 * MiB) });
        expect(created.status).to.equal(201);
        const patched = await call(t.baseUrl + created.headers.get('location'), {
          method: 'PATCH',
          headers: { ...TUS, ...OCTETS, 'Upload-Offset': '0' },
          body: new Uint8Array(Buffer.alloc(sent, i)),
        });
        expect(patched.status, patched.text).to.equal(204);
      }
      const stats = (await call(t.url('/api/v1/stats'), { key: apiKey })).body.stats;
      expect(stats.total_size).to.equal(0);
      expect(stats.reserved_size).to.be.at.least(2 * sent);
      const held = (await call(t.url(`/api/v1/requests/${request.request_id}`), { key: apiKey })).body.request;
      expect(held.uploads_in_progress).to.equal(2);
      expect(held.bytes_held).to.be.at.least(2 * sent);
      // The owner has no room left ...
      expect((await uploadFile(t.baseUrl, apiKey, 'mine.bin', Buffer.alloc(2 * MiB))).body.error.code).to.equal('storage_quota_exceeded');
      // ... until the request is closed: its uploads end and their bytes and slots come back with the close.
      expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: apiKey })).status).to.equal(200);
      const after = (await call(t.url('/api/v1/stats'), { key: apiKey })).body.stats;
      expect(after).to.include({ total_size: 0, reserved_size: 0 });
      const { prisma } = t.built.db;
      expect(await prisma.pendingObject.count({ where: { accountId } })).to.equal(0);
      expect((await prisma.dailyUpload.findMany({ where: { accountId } })).reduce((sum, d) => sum + d.count, 0)).to.equal(0);
      expect((await uploadFile(t.baseUrl, apiKey, 'mine.bin', Buffer.alloc(5 * MiB))).status).to.equal(201);
    });
  });
}
