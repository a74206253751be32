import { expect } from 'chai';
import { backends } from '../helpers/databases.js';
import { call, uploadFile } from '../helpers/client.js';
import { PUBLIC_URL } from '../helpers/server.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';

// The spec's six fields, expires_at (issue 23: null unless the upload asked for an expiry) and
// request_id (issue 45: null unless the file came through a file request).
const FILE_FIELDS = ['download_count', 'expires_at', 'file_id', 'filename', 'public_link', 'request_id', 'size', 'upload_date'];

for (const backend of backends) {
  describe(`files: list, info, delete (${backend})`, () => {
    let t: BuiltTestServer;
    before(async () => {
      t = await buildTestServer(backend);
    });
    after(() => t?.close());

    describe('GET /files', () => {
      let key: string;
      let ids: number[];
      before(async () => {
        ({ apiKey: key } = await t.account());
        ids = [];
        for (let i = 0; i < 45; i++) ids.push((await uploadFile(t.baseUrl, key, `f${i}.txt`, 'x'.repeat(i))).body.file_id);
      });
      const list = (query = '') => call(t.url(`/api/v1/files${query}`), { key });

      it('when no parameters are given, then page 1 of 20, newest first, with the pagination object', async () => {
        const res = await list();
        expect(res.status).to.equal(200);
        expect(res.body.success).to.equal(true);
        expect(res.body.pagination).to.deep.equal({ page: 1, limit: 20, total: 45, pages: 3 });
        expect(res.body.files.map((f: { file_id: number }) => f.file_id)).to.deep.equal(ids.slice().reverse().slice(0, 20));
      });

      it('when listed, then each item carries the six file fields and expires_at', async () => {
        const res = await list('?limit=1');
        const [item] = res.body.files;
        expect(Object.keys(item).sort()).to.deep.equal(FILE_FIELDS);
        expect(item).to.include({ file_id: ids[44], filename: 'f44.txt', size: 44, download_count: 0 });
        expect(item.upload_date).to.match(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
        expect(item.public_link).to.match(new RegExp(`^${PUBLIC_URL}/download/[A-Za-z0-9_-]+$`));
      });

      it('when the last page is partial, then it holds the remainder and pages is rounded up', async () => {
        const res = await list('?page=3&limit=20');
        expect(res.body.files).to.have.length(5);
        expect(res.body.pagination).to.deep.equal({ page: 3, limit: 20, total: 45, pages: 3 });
        expect(res.body.files.at(-1).file_id).to.equal(ids[0]);
      });

      it('when limit is 100, then up to 100 items come back', async () => {
        const res = await list('?limit=100');
        expect(res.body.files).to.have.length(45);
        expect(res.body.pagination.pages).to.equal(1);
      });

      it('when the page is past the end, then the list is empty, not an error', async () => {
        const res = await list('?page=99');
        expect(res.status).to.equal(200);
        expect(res.body.files).to.deep.equal([]);
        expect(res.body.pagination).to.deep.equal({ page: 99, limit: 20, total: 45, pages: 3 });
      });

      for (const query of ['?page=0', '?page=-1', '?page=1.5', '?page=abc', '?limit=0', '?limit=101', '?limit=x', '?page=', '?page=1&page=2']) {
        it(`when the query is ${query}, then 400 invalid_parameter`, async () => {
          const res = await list(query);
          expect(res.status).to.equal(400);
          expect(res.body.success).to.equal(false);
          expect(res.body.error.code).to.equal('invalid_parameter');
        });
      }

      it('when the account has no files, then total 0 and pages 0', async () => {
        const { apiKey } = await t.account();
        const res = await call(t.url('/api/v1/files'), { key: apiKey });
        expect(res.body).to.deep.equal({ success: true, files: [], pagination: { page: 1, limit: 20, total: 0, pages: 0 } });
      });

      it("when another account lists, then it sees none of this account's files", async () => {
        const { apiKey } = await t.account();
        await uploadFile(t.baseUrl, apiKey, 'mine.txt', 'x');
        const res = await call(t.url('/api/v1/files'), { key: apiKey });
        expect(res.body.files.map((f: { filename: string }) => f.filename)).to.deep.equal(['mine.txt']);
      });
    });

    describe('GET /files/{file_id}', () => {
      it('when the file exists, then all six fields and expires_at come back in `file`', async () => {
        const { apiKey } = await t.account();
        const up = await uploadFile(t.baseUrl, apiKey, 'info.txt', 'hello');
        const res = await call(t.url(`/api/v1/files/${up.body.file_id}`), { key: apiKey });
        expect(res.status).to.equal(200);
        expect(Object.keys(res.body).sort()).to.deep.equal(['file', 'success']);
        expect(Object.keys(res.body.file).sort()).to.deep.equal(FILE_FIELDS);
        expect(res.body.file).to.include({ file_id: up.body.file_id, filename: 'info.txt', size: 5, download_count: 0, public_link: up.body.public_link });
        const uploaded = Date.parse(`${res.body.file.upload_date.replace(' ', 'T')}Z`);
        expect(Math.abs(Date.now() - uploaded)).to.be.lessThan(60_000);
      });

      for (const id of ['0', '-1', 'abc', '1.5', '99999999999999999999', '1e3']) {
        it(`when the id is ${id}, then 400 invalid_file_id`, async () => {
          const { apiKey } = await t.account();
          const res = await call(t.url(`/api/v1/files/${id}`), { key: apiKey });
          expect(res.status).to.equal(400);
          expect(res.body.error.code).to.equal('invalid_file_id');
        });
      }

      it("when the id is another account's file, then 404 with the same body as a missing file", async () => {
        const owner = await t.account();
        const other = await t.account();
        const up = await uploadFile(t.baseUrl, owner.apiKey, 'private.txt', 'secret');
        const foreign = await call(t.url(`/api/v1/files/${up.body.file_id}`), { key: other.apiKey });
        const missing = await call(t.url('/api/v1/files/999999999'), { key: other.apiKey });
        expect(foreign.status).to.equal(404);
        expect(missing.status).to.equal(404);
        expect(foreign.text).to.equal(missing.text);
        expect(foreign.body.error.code).to.equal('file_not_found');
      });
    });

    describe('DELETE /files/{file_id}', () => {
      it('when the file is deleted, then the row and the object are gone and the link is dead', async () => {
        const { apiKey } = await t.account();
        const before = await t.objects();
        const up = await uploadFile(t.baseUrl, apiKey, 'bye.txt', 'bye');
        expect(await t.objects()).to.have.length(before.length + 1);
        const res = await call(t.url(`/api/v1/files/${up.body.file_id}`), { method: 'DELETE', key: apiKey });
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal({ success: true, message: 'File deleted successfully' });
        expect(await t.objects()).to.deep.equal(before);
        expect((await call(t.url(`/api/v1/files/${up.body.file_id}`), { key: apiKey })).status).to.equal(404);
        expect((await call(t.url(up.body.public_link))).status).to.equal(404);
        const again = await call(t.url(`/api/v1/files/${up.body.file_id}`), { method: 'DELETE', key: apiKey });
        expect(again.status).to.equal(404);
      });

      it("when the id is another account's file, then 404, identical to a missing one, and the file survives", async () => {
        const owner = await t.account();
        const other = await t.account();
        const up = await uploadFile(t.baseUrl, owner.apiKey, 'keep.txt', 'keep');
        const foreign = await call(t.url(`/api/v1/files/${up.body.file_id}`), { method: 'DELETE', key: other.apiKey });
        const missing = await call(t.url('/api/v1/files/999999999'), { method: 'DELETE', key: other.apiKey });
        expect(foreign.status).to.equal(404);
        expect(foreign.text).to.equal(missing.text);
        expect((await call(t.url(`/api/v1/files/${up.body.file_id}`), { key: owner.apiKey })).status).to.equal(200);
        expect((await call(t.url(up.body.public_link))).status).to.equal(200);
      });

      it('when the id is not a positive integer, then 400 invalid_file_id', async () => {
        const { apiKey } = await t.account();
        const res = await call(t.url('/api/v1/files/..%2F1'), { method: 'DELETE', key: apiKey });
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_file_id');
      });
    });

    describe('GET /stats', () => {
      it('when files are uploaded and deleted, then totals follow and limits come from the plan', async () => {
        const { apiKey } = await t.account('business');
        const empty = await call(t.url('/api/v1/stats'), { key: apiKey });
        expect(empty.body).to.deep.equal({
          success: true,
          stats: { total_files: 0, total_size: 0, reserved_size: 0 },
          limits: { max_file_size: 10737418240, daily_uploads: 1000, concurrent_uploads: 8, max_total_size: null, max_expires_in: null },
          plan: 'business',
        });
        const a = await uploadFile(t.baseUrl, apiKey, 'a.txt', 'a'.repeat(100));
        await uploadFile(t.baseUrl, apiKey, 'b.txt', 'b'.repeat(23));
        expect((await call(t.url('/api/v1/stats'), { key: apiKey })).body.stats).to.deep.equal({ total_files: 2, total_size: 123, reserved_size: 0 });
        await call(t.url(`/api/v1/files/${a.body.file_id}`), { method: 'DELETE', key: apiKey });
        expect((await call(t.url('/api/v1/stats'), { key: apiKey })).body.stats).to.deep.equal({ total_files: 1, total_size: 23, reserved_size: 0 });
      });

      it('when the account is on pro, then the example limits of the spec come back', async () => {
        const { apiKey } = await t.account('pro');
        const res = await call(t.url('/api/v1/stats'), { key: apiKey });
        // The spec's two limits with its example values, plus the plan's cap on concurrent uploads, storage and retention (none seeded).
        expect(res.body.limits).to.deep.equal({ max_file_size: 5368709120, daily_uploads: 500, concurrent_uploads: 4, max_total_size: null, max_expires_in: null });
        expect(res.body.plan).to.equal('pro');
      });
    });
  });
}
