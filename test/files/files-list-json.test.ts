import { expect } from 'chai';
import { LISTED, toFileListing } from '../../src/files/record.js';
import { presentFile } from '../../src/files/present.js';
import { pagination } from '../../src/http/list-query.js';
import { backends } from '../helpers/databases.js';
import { call, upload, uploadFile } from '../helpers/client.js';
import { PUBLIC_URL, type TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

// GET /files is written by PostgreSQL as JSON text (FileService.pageJson).
// Each answer here must be, to the byte, what the rows read by Prisma and
// shaped by presentFile (the single-file answer's shape) give through
// JSON.stringify: the list the route built before, and the one clients parse.
for (const backend of backends) {
  describe(`files list written by the database (${backend})`, () => {
    let t: TestServer;
    let key: string;
    let accountId: number;
    before(async () => {
      t = await sharedServer(backend);
      ({ apiKey: key, accountId } = await t.account());
      const { prisma } = t.server.db;
      const ids: number[] = [];
      for (const name of ['plain.txt', 'naïve "quoted" 名前 😀.txt', 'back\\slash.txt', "it's <b>&amp;</b>.txt", 'Ωmega.bin']) {
        ids.push((await uploadFile(t.server.url, key, name, name)).body.file_id);
      }
      // Expiry, a password, a download budget: rules the list must not leak, and an expires_at it must show.
      const ruled = await upload(t.server.url, key, [
        { name: 'expires_in', content: '3600' },
        { name: 'password', content: 'secret' },
        { name: 'max_downloads', content: '3' },
        { name: 'file', filename: 'ruled.txt', content: 'ruled' },
      ]);
      expect(ruled.status).to.equal(201);
      ids.push(ruled.body.file_id);
      // A second link, then the primary revoked: public_link is the rotated token.
      const extra = await call(t.url(`/api/v1/files/${ids[0]}/links`), { method: 'POST', key, headers: { 'Content-Type': 'application/json' }, body: '{}' });
      expect(extra.status).to.equal(201);
      const links = await call(t.url(`/api/v1/files/${ids[1]}/links`), { key });
      const primary = links.body.links.find((l: { primary: boolean }) => l.primary);
      expect((await call(t.url(`/api/v1/files/${ids[1]}/links/${primary.link_id}`), { method: 'DELETE', key })).status).to.equal(200);
      // One download counted.
      const first = await call(t.url(`/api/v1/files/${ids[2]}`), { key });
      expect((await fetch(t.url(first.body.file.public_link))).status).to.equal(200);
      // What uploads refuse but a row can hold (an older release, SQL): control characters,
      // DEL, U+2028, a size past 2^32, milliseconds that must be cut and not rounded.
      await prisma.file.update({ where: { id: ids[3] }, data: { filename: 'ctl\u0001\u001f\u007f\b\f\n\r\t\u2028end', size: 5_368_709_121n, createdAt: new Date('2026-03-04T05:06:07.999Z') } });
      // A file that came through a file request.
      const request = await call(t.url('/api/v1/requests'), { method: 'POST', key, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 'r' }) });
      expect(request.status).to.equal(201);
      await prisma.file.update({ where: { id: ids[4] }, data: { requestId: request.body.request.request_id } });
    });

    /** The answer as the route built it from Prisma's rows until the database wrote it. */
    async function expected(account: number, page: number, limit: number): Promise<string> {
      const { prisma } = t.server.db;
      const rows = await prisma.file.findMany({ where: { accountId: account }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], skip: (page - 1) * limit, take: limit, select: LISTED });
      const counters = await prisma.account.findUnique({ where: { id: account }, select: { fileCount: true } });
      const total = counters?.fileCount ?? 0;
      return JSON.stringify({ success: true, files: rows.map(toFileListing).map((f) => presentFile(f, PUBLIC_URL)), pagination: pagination(page, limit, total) });
    }

    for (const [query, page, limit] of [['', 1, 20], ['?limit=1', 1, 1], ['?page=2&limit=4', 2, 4], ['?page=6&limit=1', 6, 1], ['?page=7&limit=1', 7, 1], ['?page=3&limit=100', 3, 100], ['?limit=100', 1, 100], ['?page=999999999&limit=100', 999999999, 100]] as const) {
      it(`when the query is "${query}", then the body is byte for byte the one presentFile and JSON.stringify give`, async () => {
        const res = await call(t.url(`/api/v1/files${query}`), { key });
        expect(res.status).to.equal(200);
        expect(res.headers.get('content-type')).to.equal('application/json; charset=utf-8');
        expect(res.text).to.equal(await expected(accountId, page, limit));
      });
    }

    it('when the page holds every kind of file, then it is not empty and shows the rules only as expires_at', async () => {
      const res = await call(t.url('/api/v1/files'), { key });
      expect(res.body.files).to.have.length(6);
      expect(res.body.files.filter((f: { expires_at: string | null }) => f.expires_at !== null)).to.have.length(1);
      expect(res.body.files.filter((f: { request_id: string | null }) => f.request_id !== null)).to.have.length(1);
      expect(res.text).to.include('ctl\\u0001\\u001f\u007f\\b\\f\\n\\r\\t\u2028end');
    });

    it('when the account has no files, then files is [] and total 0, as before', async () => {
      const { apiKey, accountId: empty } = await t.account();
      const res = await call(t.url('/api/v1/files'), { key: apiKey });
      expect(res.text).to.equal(await expected(empty, 1, 20));
      expect(res.body.files).to.deep.equal([]);
    });
  });
}
