// Every way a PATCH can end badly leaves no half-written state visible and an
// Upload-Offset that is exactly what was saved: the store failing mid-body,
// the lease lost to another request (a process that stalled past it), a body
// longer than the upload. Plus the cap on an upload's whole life that the S3
// lifecycle rule imposes. The S3 halves run on Ceph RGW too
// (.ci/rgw-suites.sh leaves out titles with "local store").
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import type { Caller } from '../../src/accounts/service.js';
import { tusService } from '../helpers/tus-service.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { sleep } from '../helpers/raw-upload.js';
import type { TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { create, download, head, patch, streamingPatch, tusServer, uploadUrl } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
for (const store of ['local', 's3'] as const) {
  describe(`PATCH faults (${store} store)`, function () {
    this.timeout(60_000);
    let s3: TestS3;
    let server: Awaited<ReturnType<typeof tusServer>>;
    let t: TestServer;
    let key: string;
    before(async () => {
      if (store === 's3') s3 = await startTestS3();
      server = await tusServer('pglite', store, () => s3, { GC_INTERVAL: '0' });
      t = server.t;
    });
    after(async () => {
      await server?.close();
      await s3?.close();
    });
    beforeEach(async () => {
      ({ apiKey: key } = await t.account());
    });

    it('when a PATCH body is longer than the rest of Upload-Length, then 400 upload_length_exceeded, nothing is kept, and the next PATCH is taken at once', async () => {
      const data = randomBytes(1000);
      const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: data.length }));
      const over = await patch(url, key, 0, randomBytes(1001));
      expect(over.status).to.equal(400);
      expect(over.body.error.code).to.equal('upload_length_exceeded');
      expect((await head(url, key)).headers.get('upload-offset')).to.equal('0');
      // No lease left behind: not 409 upload_busy for the next 30 s.
      const done = await patch(url, key, 0, data);
      expect(done.status, JSON.stringify(done.body)).to.equal(204);
      expect(sha(await download(t, done.headers.get('dropstream-public-link')!))).to.equal(sha(data));
    });

    if (store === 's3') {
      it('when the store goes down mid-PATCH, then 503 store_unavailable, Upload-Offset stays at what was saved, and the upload continues from there once it is back', async () => {
        const data = randomBytes(13 * MiB);
        const url = uploadUrl(t.server.url, await create(t.server.url, key, { length: data.length }));
        expect((await patch(url, key, 0, data.subarray(0, 2 * MiB))).status).to.equal(204);
        const cut = streamingPatch(url, key, 2 * MiB, data.length - 2 * MiB);
        // Past one part: the multipart upload exists and has a part.
        await cut.send(data.subarray(2 * MiB, 8 * MiB));
        await sleep(500);
        await s3.stop();
        try {
          await cut.send(data.subarray(8 * MiB, 11 * MiB));
          cut.end(data.subarray(11 * MiB));
          const res = await cut.response;
          expect(res.status).to.equal(503);
          expect(JSON.parse(res.body!).error.code).to.equal('store_unavailable');
          const status = await head(url, key);
          expect(status.status).to.equal(200);
          expect(status.headers.get('upload-offset')).to.equal(String(2 * MiB));
        } finally {
          await s3.start();
        }
        // Nothing is left locked, and what the failed PATCH wrote is written over.
        const done = await patch(url, key, 2 * MiB, data.subarray(2 * MiB));
        expect(done.status, JSON.stringify(done.body)).to.equal(204);
        expect(sha(await download(t, done.headers.get('dropstream-public-link')!))).to.equal(sha(data));
        expect(await server.leftovers()).to.deep.equal([]);
      });
    }

    if (store === 'local') {
      // Leases of 30 s are too long for a test: these drive the service
      // itself, with a short lease and its own clock, on the server's database.
      describe('the service, with a short lease (local store)', () => {
        let caller: Caller;
        const service = (options: { leaseMs?: number; clock?: () => Date; expirySeconds?: number; lifetimeSeconds?: number } = {}) =>
          tusService(t.server.db.prisma, new LocalObjectStore({ root: join(t.dataDir, 'objects') }), {
            onCleanupError: (err) => {
              throw err;
            },
            ...options,
          });
        beforeEach(async () => {
          const { accountId } = await t.account();
          caller = { accountId, plan: { name: 'test', apiAccess: true, requestsPerMinute: 1000, requestsPerDay: 1000, maxFileSize: 64 * MiB, dailyUploads: 100, concurrentUploads: null, maxTotalSize: null, maxExpiresIn: null } };
        });

        it('when a PATCH loses its lease to another request (it stalled past it), then it stops with 409 upload_busy, saves nothing and leaves the other lease alone (local store)', async () => {
          const uploads = service({ leaseMs: 300 });
          const data = randomBytes(3 * MiB);
          const upload = await uploads.create(caller, { length: data.length, rawFilename: 'lease.bin' });
          const first = await uploads.append(caller, upload.id, { offset: 0, body: PassThrough.from([data.subarray(0, MiB)]) as never });
          expect(first.status.offset).to.equal(MiB);
          const body = new PassThrough();
          const appending = uploads.append(caller, upload.id, { offset: MiB, body });
          body.write(data.subarray(MiB, 2 * MiB));
          await sleep(50);
          // What another instance does once the lease has run out: takes it.
          await t.server.db.prisma.resumableUpload.update({ where: { id: upload.id }, data: { lockToken: 'other', lockedUntil: new Date(Date.now() + 60_000) } });
          const err = await appending.catch((e: unknown) => e);
          expect(err).to.have.property('code', 'upload_busy');
          const row = await t.server.db.prisma.resumableUpload.findUniqueOrThrow({ where: { id: upload.id } });
          expect(Number(row.offset), 'nothing of the lost PATCH saved').to.equal(MiB);
          expect(row.lockToken, "the other request's lease stays").to.equal('other');
          // Once the other lease is gone, the upload continues from the saved offset.
          await t.server.db.prisma.resumableUpload.update({ where: { id: upload.id }, data: { lockToken: null, lockedUntil: null } });
          const done = await uploads.append(caller, upload.id, { offset: MiB, body: PassThrough.from([data.subarray(MiB)]) as never });
          expect(done.status.file?.size).to.equal(data.length);
          expect(done.status.file?.sha256).to.equal(sha(data));
          expect(sha(await download(t, `/download/${done.status.file!.linkToken}`))).to.equal(sha(data));
        });

        it('when PATCHes keep an upload alive, then Upload-Expires never passes its lifetime (the S3 lifecycle rule), counted from its creation (local store)', async () => {
          let now = new Date('2026-01-01T00:00:00Z');
          const uploads = service({ clock: () => now, expirySeconds: 86_400, lifetimeSeconds: 3 * 86_400 });
          const upload = await uploads.create(caller, { length: 10, rawFilename: 'long.bin' });
          expect(upload.expiresAt.toISOString()).to.equal('2026-01-02T00:00:00.000Z');
          const write = async (offset: number) => (await uploads.append(caller, upload.id, { offset, body: PassThrough.from([Buffer.from('ab')]) as never })).status.expiresAt.toISOString();
          now = new Date('2026-01-01T20:00:00Z');
          expect(await write(0)).to.equal('2026-01-02T20:00:00.000Z');
          now = new Date('2026-01-02T18:00:00Z');
          expect(await write(2)).to.equal('2026-01-03T18:00:00.000Z');
          now = new Date('2026-01-03T12:00:00Z');
          expect(await write(4), 'capped at creation + 3 days').to.equal('2026-01-04T00:00:00.000Z');
          now = new Date('2026-01-04T00:00:00Z');
          expect(await uploads.append(caller, upload.id, { offset: 6, body: PassThrough.from([Buffer.from('cd')]) as never }).catch((e: unknown) => e)).to.have.property('code', 'upload_not_found');
        });
      });
    }
  });
}
