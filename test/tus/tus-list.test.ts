// GET /api/v1/uploads (issue 38): an account's unfinished tus uploads, which
// hold its daily slots and storage room until they finish, expire or are
// terminated, listed so its owner can find them: offset, length, expiry and
// the URL to resume or DELETE, paged as the files list is.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { create, patch, terminate, uploadUrl } from '../helpers/tus.js';

const PLAN = { api_access: true, requests_per_minute: 100_000, requests_per_day: 1_000_000, max_file_size: 1024 * 1024, daily_uploads: 1000, max_total_size: 100_000 };

const list = (t: BuiltTestServer, key: string, query = '') => call(t.url(`/api/v1/uploads${query}`), { key });

for (const backend of backends) {
  describe(`listing unfinished uploads (${backend})`, function () {
    this.timeout(30_000);
    let t: BuiltTestServer;
    before(async () => {
      t = await buildTestServer(backend, { GC_INTERVAL: '0' });
      await t.plan('quota-100k', PLAN);
    });
    after(() => t?.close());

    it('when an account has partial, finished and terminated uploads, then GET /uploads lists the partial ones, newest first, with offset, length, expiry and URL', async () => {
      const { apiKey } = await t.account('quota-100k');
      const other = await t.account('quota-100k');
      const first = await create(t.baseUrl, apiKey, { length: 50_000, filename: 'first.bin' });
      expect((await patch(uploadUrl(t.baseUrl, first), apiKey, 0, randomBytes(20_000))).status).to.equal(204);
      const deferred = await create(t.baseUrl, apiKey, { filename: 'deferred.bin' });
      const finished = await create(t.baseUrl, apiKey, { length: 10 });
      expect((await patch(uploadUrl(t.baseUrl, finished), apiKey, 0, randomBytes(10))).status).to.equal(204);
      const ended = await create(t.baseUrl, apiKey, { length: 10 });
      expect((await terminate(uploadUrl(t.baseUrl, ended), apiKey)).status).to.equal(204);
      await create(t.baseUrl, other.apiKey, { length: 10, filename: 'not-yours.bin' });

      const res = await list(t, apiKey);
      expect(res.status).to.equal(200);
      expect(res.headers.get('cache-control')).to.equal('no-store');
      expect(res.body.pagination).to.deep.equal({ page: 1, limit: 20, total: 2, pages: 1 });
      const [newest, oldest] = res.body.uploads;
      expect(newest).to.deep.include({ filename: 'deferred.bin', offset: 0, length: null, url: deferred.headers.get('location') });
      expect(oldest).to.deep.include({ filename: 'first.bin', offset: 20_000, length: 50_000, url: first.headers.get('location') });
      expect(oldest.upload_id).to.equal(first.headers.get('location')!.split('/').pop());
      expect(Date.parse(oldest.expires_at)).to.be.above(Date.now());
    });

    it('when the list is paged, then page and limit work as for files, and a bad value is 400 invalid_parameter', async () => {
      const { apiKey } = await t.account('quota-100k');
      for (let i = 0; i < 3; i++) await create(t.baseUrl, apiKey, { length: 10, filename: `u${i}.bin` });
      const second = await list(t, apiKey, '?page=2&limit=2');
      expect(second.body.pagination).to.deep.equal({ page: 2, limit: 2, total: 3, pages: 2 });
      expect(second.body.uploads.map((u: { filename: string }) => u.filename)).to.deep.equal(['u0.bin']);
      const bad = await list(t, apiKey, '?limit=101');
      expect([bad.status, bad.body.error.code]).to.deep.equal([400, 'invalid_parameter']);
    });

    it('when the owner terminates a listed upload, then it leaves the list and its room comes back', async () => {
      const { apiKey, accountId } = await t.account('quota-100k');
      const held = await create(t.baseUrl, apiKey, { length: 100_000 });
      expect((await patch(uploadUrl(t.baseUrl, held), apiKey, 0, randomBytes(90_000))).status).to.equal(204);
      expect((await create(t.baseUrl, apiKey, { length: 20_000 })).body.error.code).to.equal('storage_quota_exceeded');
      const [listed] = (await list(t, apiKey)).body.uploads;
      expect((await terminate(t.baseUrl + listed.url, apiKey)).status).to.equal(204);
      expect((await list(t, apiKey)).body.uploads).to.deep.equal([]);
      const account = await t.built.db.prisma.account.findUniqueOrThrow({ where: { id: accountId } });
      expect(Number(account.reservedBytes)).to.equal(0);
      expect((await create(t.baseUrl, apiKey, { length: 20_000 })).status).to.equal(201);
    });
  });
}
