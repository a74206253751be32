import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { startTestServer, startTwoInstances, type TestServer } from '../helpers/server.js';
import { recountFiles } from '../../src/files/file-rows.js';
import { commitFile, UploadSweptError } from '../../src/intake/finish.js';

/** The account's file counters from /stats (reserved_size, what uploads in progress hold, is not a counter of files). */
async function stats(t: TestServer, key: string) {
  const { total_files, total_size } = (await call(t.url('/api/v1/stats'), { key })).body.stats;
  return { total_files, total_size };
}

/** What the account really holds, from every page of the list. */
async function listed(t: TestServer, key: string): Promise<{ total: number; files: number; bytes: number }> {
  let page = 1;
  let files = 0;
  let bytes = 0;
  let total = -1;
  for (;;) {
    const res = await call(t.url(`/api/v1/files?limit=100&page=${page}`), { key });
    total = res.body.pagination.total;
    if (!res.body.files.length) break;
    files += res.body.files.length;
    bytes += res.body.files.reduce((n: number, f: { size: number }) => n + f.size, 0);
    page += 1;
  }
  return { total, files, bytes };
}

/** 20 uploads of different sizes and 10 deletes of earlier files, all at once, spread over `servers`. */
async function churn(servers: TestServer[], key: string) {
  const at = (i: number) => servers[i % servers.length]!;
  const earlier = await Promise.all(Array.from({ length: 10 }, (_, i) => uploadFile(at(i).server.url, key, `old-${i}.bin`, randomBytes(100 + i))));
  const results = await Promise.all([
    ...Array.from({ length: 20 }, (_, i) => uploadFile(at(i).server.url, key, `new-${i}.bin`, randomBytes(1000 + i * 37))),
    ...earlier.map((u, i) => call(at(i + 1).url(`/api/v1/files/${u.body.file_id}`), { method: 'DELETE', key })),
  ]);
  expect(results.map((r) => r.status).sort()).to.deep.equal([...Array(20).fill(201), ...Array(10).fill(200)].sort());
  return { files: 20, bytes: Array.from({ length: 20 }, (_, i) => 1000 + i * 37).reduce((a, b) => a + b, 0) };
}

for (const backend of backends) {
  describe(`file counters (${backend})`, () => {
    let t: TestServer;
    before(async () => {
      t = await startTestServer(backend);
    });
    after(async () => {
      await t.close();
    });

    it('when 20 uploads and 10 deletes run at once, then /stats and the list total match what the account holds', async () => {
      const { apiKey } = await t.account();
      const expected = await churn([t], apiKey);
      const holds = await listed(t, apiKey);
      expect(holds).to.deep.equal({ total: expected.files, files: expected.files, bytes: expected.bytes });
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: expected.files, total_size: expected.bytes });
    });

    it('when a counter is skewed in the database, then `gc` corrects it and says so, and leaves correct ones alone', async () => {
      const skewed = await t.account();
      const fine = await t.account();
      for (const a of [skewed, fine]) for (let i = 0; i < 3; i++) await uploadFile(t.server.url, a.apiKey, `f${i}`, 'x'.repeat(10 + i));
      await t.server.db.prisma.account.update({ where: { id: skewed.accountId }, data: { fileCount: 1000, totalBytes: -5n } });
      expect(await stats(t, skewed.apiKey)).to.deep.equal({ total_files: 1000, total_size: -5 });

      expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ counters_fixed: 1 });
      expect(await stats(t, skewed.apiKey)).to.deep.equal({ total_files: 3, total_size: 33 });
      expect(await stats(t, fine.apiKey)).to.deep.equal({ total_files: 3, total_size: 33 });
      expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ counters_fixed: 0 });
    });

    it('when the recount goes over the accounts a few at a time, then a skewed account in every batch is corrected, and only those', async () => {
      const made = [];
      for (let i = 0; i < 5; i++) {
        const a = await t.account();
        await uploadFile(t.server.url, a.apiKey, 'f', 'x'.repeat(i + 1));
        made.push(a);
      }
      const skewed = [made[0]!, made[2]!, made[4]!];
      for (const a of skewed) await t.server.db.prisma.account.update({ where: { id: a.accountId }, data: { fileCount: 9, totalBytes: 99n } });
      // Two accounts per statement: the five new ones (and the suite's earlier ones) span several.
      expect(await recountFiles(t.server.db.prisma, 2)).to.equal(3);
      for (const [i, a] of made.entries()) expect(await stats(t, a.apiKey)).to.deep.equal({ total_files: 1, total_size: i + 1 });
      expect(await recountFiles(t.server.db.prisma, 2)).to.equal(0);
    });

    it('when `gc` recounts while uploads and deletes run, then the counters end exact', async () => {
      const { accountId, apiKey } = await t.account();
      await uploadFile(t.server.url, apiKey, 'first', 'abc');
      await t.server.db.prisma.account.update({ where: { id: accountId }, data: { fileCount: 50, totalBytes: 7n } });
      const [expected] = await Promise.all([churn([t], apiKey), t.admin('POST', '/admin/gc', {}), t.admin('POST', '/admin/gc', {})]);
      await t.admin('POST', '/admin/gc', {});
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: expected.files + 1, total_size: expected.bytes + 3 });
    });

    it('when an upload completes after the sweeper claimed it, then no row is written and the counters do not move', async () => {
      const { accountId, apiKey } = await t.account();
      await uploadFile(t.server.url, apiKey, 'one', 'abcd');
      const file = { accountId, filename: 'late.bin', size: 10, sha256: '0'.repeat(64), storageKey: `xx/${randomBytes(16).toString('hex')}` };
      let error: unknown;
      await commitFile(t.server.db.prisma, file).catch((err: unknown) => (error = err));
      expect(error).to.be.instanceOf(UploadSweptError);
      expect(await t.server.db.prisma.file.count({ where: { storageKey: file.storageKey } })).to.equal(0);
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: 1, total_size: 4 });
    });
  });
}

if (backends.includes('postgresql')) {
  describe('file counters across two instances (PostgreSQL)', () => {
    let a: TestServer;
    let b: TestServer;
    let close: () => Promise<void>;
    before(async () => {
      ({ a, b, close } = await startTwoInstances());
    });
    after(() => close());

    it('when 20 uploads and 10 deletes run at once on two instances, then both instances report exact counters', async () => {
      const { apiKey } = await a.account();
      const expected = await churn([a, b], apiKey);
      for (const t of [a, b]) {
        expect(await listed(t, apiKey)).to.deep.equal({ total: expected.files, files: expected.files, bytes: expected.bytes });
        expect(await stats(t, apiKey)).to.deep.equal({ total_files: expected.files, total_size: expected.bytes });
      }
    });
  });
}
