// Resumable uploads against the account counters and the sweep: a finished
// upload counts like a plain one (GET /stats, the list's total), an
// unfinished one never does; the sweep's store-side pass (open uploads no
// record claims, older than GC_GRACE) never takes a live resumable upload,
// however long it has been silent; an expired one goes with its slot given
// back exactly once. Local and S3 halves (the S3 half also runs on Ceph RGW:
// .ci/rgw-suites.sh, which leaves out titles with "local store").
import { randomBytes } from 'node:crypto';
import { utimes } from 'node:fs/promises';
import { basename } from 'node:path';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, head, patch, terminate, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const HOUR = 3600 * 1000;

async function stats(t: TestServer, key: string) {
  const [s, list] = await Promise.all([call(t.url('/api/v1/stats'), { key }), call(t.url('/api/v1/files'), { key })]);
  return { total_files: s.body.stats.total_files, total_size: s.body.stats.total_size, list_total: list.body.pagination.total };
}

/** Makes every unfinished upload of the server expired, as RESUMABLE_EXPIRY would after a day. */
async function expireAll(t: TestServer) {
  await t.server.db.prisma.resumableUpload.updateMany({ data: { expiresAt: new Date(Date.now() - 1000) } });
}

for (const store of ['local', 's3'] as const) {
  describe(`resumable uploads, counters and the sweep (${store} store)`, function () {
    this.timeout(60_000);
    let s3: TestS3;
    let server: Awaited<ReturnType<typeof tusServer>>;
    let t: TestServer;
    before(async () => {
      if (store === 's3') s3 = await startTestS3();
      server = await tusServer('pglite', store, () => s3, { GC_INTERVAL: '0' });
      t = server.t;
      await t.plan('tus-two', { api_access: true, requests_per_minute: 1000, requests_per_day: 10000, max_file_size: 16 * MiB, daily_uploads: 2 });
    });
    after(async () => {
      await server?.close();
      await s3?.close();
    });
    afterEach(async () => {
      // Nothing of one test may be swept by the next.
      await expireAll(t);
      await t.admin('POST', '/admin/gc', { grace_seconds: 0 });
    });

    it('when a resumable upload finishes, then GET /stats and the list count it; terminating or expiring unfinished ones changes nothing', async () => {
      const { apiKey } = await t.account();
      const plain = await uploadFile(t.server.url, apiKey, 'a.txt', 'abc');
      expect(plain.status).to.equal(201);
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: 1, total_size: 3, list_total: 1 });

      const data = randomBytes(6 * MiB + 1);
      const url = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: data.length }));
      expect((await patch(url, apiKey, 0, data.subarray(0, 5 * MiB + 7))).status).to.equal(204);
      expect(await stats(t, apiKey), 'not while unfinished').to.deep.equal({ total_files: 1, total_size: 3, list_total: 1 });
      const done = await patch(url, apiKey, 5 * MiB + 7, data.subarray(5 * MiB + 7));
      expect(done.status).to.equal(204);
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: 2, total_size: 3 + data.length, list_total: 2 });
      // Finishing again (HEAD, a repeated last PATCH) counts nothing twice.
      expect((await head(url, apiKey)).status).to.equal(200);
      expect((await patch(url, apiKey, data.length, Buffer.alloc(0))).status).to.equal(204);
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: 2, total_size: 3 + data.length, list_total: 2 });

      const { apiKey: other } = await t.account();
      const dropped = uploadUrl(t.server.url, await create(t.server.url, other, { length: 6 * MiB }));
      expect((await patch(dropped, other, 0, randomBytes(5 * MiB + 1))).status).to.equal(204);
      expect((await terminate(dropped, other)).status).to.equal(204);
      const expiring = uploadUrl(t.server.url, await create(t.server.url, other, { length: 6 * MiB }));
      expect((await patch(expiring, other, 0, randomBytes(5 * MiB + 1))).status).to.equal(204);
      await expireAll(t);
      expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 1, failed: 0 });
      expect(await stats(t, other)).to.deep.equal({ total_files: 0, total_size: 0, list_total: 0 });
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: 2, total_size: 3 + data.length, list_total: 2 });
      // The recount (part of every gc) finds the counters exact.
      expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ counters_fixed: 0 });
      expect(await stats(t, apiKey)).to.deep.equal({ total_files: 2, total_size: 3 + data.length, list_total: 2 });
    });

    it('when a resumable upload has been silent for longer than GC_GRACE but has not expired, then sweeps (grace 0 too) leave it and it finishes', async () => {
      const { apiKey } = await t.account('tus-two');
      const data = randomBytes(7 * MiB);
      const url = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: data.length }));
      // Past one part, so S3 has a multipart upload open and the local store a temp file.
      expect((await patch(url, apiKey, 0, data.subarray(0, 5 * MiB + 3))).status).to.equal(204);
      const open = await server.leftovers();
      // Local: the temp file; S3: the multipart upload and the tail object with the 3 bytes past its part.
      expect(open).to.have.length(store === 'local' ? 1 : 2);
      const pending = await t.server.db.prisma.pendingObject.findFirstOrThrow({ where: { reason: 'resumable' } });
      // The store-side backstop can only tell the upload by what its record claims.
      if (store === 'local') expect(basename(open[0]!)).to.equal(pending.uploadId);
      else expect(open).to.deep.equal([pending.storageKey, `${pending.storageKey}.tail0`]);
      if (store === 'local') {
        // Untouched for two hours (GC_GRACE is one): the temp file's mtime, and the record's.
        const then = new Date(Date.now() - 2 * HOUR);
        await utimes(open[0]!, then, then);
      }
      await t.server.db.prisma.pendingObject.updateMany({ where: { reason: 'resumable' }, data: { touchedAt: new Date(Date.now() - 2 * HOUR) } });
      expect(await t.admin('POST', '/admin/gc', {})).to.deep.include({ uploads: 0, strays: 0, failed: 0 });
      expect(await t.admin('POST', '/admin/gc', { grace_seconds: 0 })).to.deep.include({ uploads: 0, strays: 0, failed: 0 });
      expect(await server.leftovers()).to.deep.equal(open);
      const done = await patch(url, apiKey, 5 * MiB + 3, data.subarray(5 * MiB + 3));
      expect(done.status).to.equal(204);
      const file = await fetch(t.url(done.headers.get('dropstream-public-link')!));
      expect(Buffer.from(await file.arrayBuffer()).equals(data)).to.equal(true);
      expect(await server.leftovers()).to.deep.equal([]);
    });

    it('when a resumable upload expires, then one sweep removes it with its store upload, and its daily slot comes back exactly once (concurrent sweeps too)', async () => {
      const { apiKey } = await t.account('tus-two');
      const expired = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 7 * MiB }));
      expect((await patch(expired, apiKey, 0, randomBytes(5 * MiB + 3))).status).to.equal(204);
      // What the sweep must remove: on S3 the multipart upload and its tail object.
      expect(await server.leftovers()).to.have.length(store === 'local' ? 1 : 2);
      await expireAll(t);
      // A second, live upload: the plan's two slots are now taken.
      const live = uploadUrl(t.server.url, await create(t.server.url, apiKey, { length: 10 }));
      expect((await create(t.server.url, apiKey, { length: 1 })).body.error.code).to.equal('daily_upload_limit');
      const sweeps = await Promise.all([0, 1, 2].map(() => t.admin('POST', '/admin/gc', { grace_seconds: 0 })));
      expect(sweeps.reduce((sum, r) => sum + r.uploads, 0)).to.equal(1);
      // Once one sweep has claimed the records, another may find the store's
      // upload unclaimed and abort it too: harmless, both aborts succeed.
      expect(sweeps.reduce((sum, r) => sum + r.failed, 0)).to.equal(0);
      expect(await server.leftovers()).to.deep.equal([]);
      expect((await head(expired, apiKey)).status).to.equal(404);
      // One slot back, not two: one more creation fits, the next does not.
      expect((await create(t.server.url, apiKey, { length: 1 })).status).to.equal(201);
      expect((await create(t.server.url, apiKey, { length: 1 })).body.error.code).to.equal('daily_upload_limit');
      expect((await head(live, apiKey)).status).to.equal(200);
    });
  });
}
