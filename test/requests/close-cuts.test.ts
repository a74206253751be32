// Closing or expiring a file request stops the uploads in flight through it
// (issue 50, 5): a 3 MB upload at 300 KB/s, started 2 s before the owner's
// DELETE /api/v1/requests/{id} (or before the request's expires_in), was
// answered 201 and kept. Now closing cuts it, as revoking a link cuts its
// downloads, and whatever gets past the cut is refused by the statement that
// would save the file.
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually, sleep } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { metadata, OCTETS, TUS } from '../helpers/tus.js';
import { linkPath, newRequest, throttledRequest, throttledSend } from './helpers.js';

const SIZE = 3_000_000;
const RATE = 300_000;

for (const backend of backends) {
  describe(`file requests: closing or expiring cuts uploads in flight (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    before(async () => {
      t = await startTestServer(backend, { GC_INTERVAL: '0' });
    });
    after(async () => t?.close());

    /** What the owner's account holds: files, unfinished records, the day's uploads counted. */
    async function holdings(accountId: number) {
      const { prisma } = t.server.db;
      const [files, pending, days] = await Promise.all([
        prisma.file.count({ where: { accountId } }),
        prisma.pendingObject.count({ where: { accountId } }),
        prisma.dailyUpload.findMany({ where: { accountId } }),
      ]);
      return { files, pending, daily: days.reduce((sum, d) => sum + d.count, 0) };
    }

    it('when the owner closes a request 2 s into a 3 MB upload at 300 KB/s, then the upload is cut with 404 request_not_found long before its end, and nothing is kept', async () => {
      const owner = await t.account();
      const request = await newRequest(t, owner.apiKey, { title: 'Slow' });
      const sending = throttledSend(t.server.url, request, SIZE, RATE);
      await sleep(2000);
      const closedAt = Date.now();
      expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: owner.apiKey })).status).to.equal(200);
      const outcome = await sending.outcome;
      expect(outcome.status, JSON.stringify(outcome.body)).to.equal(404);
      expect(outcome.body.error.code).to.equal('request_not_found');
      // Cut, not finished: at 300 KB/s the rest would have taken another 8 s.
      expect(outcome.sentAtAnswer).to.be.below(SIZE);
      expect(outcome.at - closedAt).to.be.below(5000);
      const left = await eventually(() => holdings(owner.accountId), (h) => h.pending === 0 && h.daily === 0);
      expect(left).to.deep.equal({ files: 0, pending: 0, daily: 0 });
      expect(await t.objects()).to.have.length(0);
    });

    it('when the request expires (expires_in 3) during a 3 MB upload at 300 KB/s, then the upload is refused with 410 request_expired, and nothing is kept', async () => {
      const owner = await t.account();
      const request = await newRequest(t, owner.apiKey, { expires_in: 3 });
      const outcome = await throttledSend(t.server.url, request, SIZE, RATE).outcome;
      expect(outcome.status, JSON.stringify(outcome.body)).to.equal(410);
      expect(outcome.body.error.code).to.equal('request_expired');
      expect(outcome.sentAtAnswer).to.be.below(SIZE);
      const left = await eventually(() => holdings(owner.accountId), (h) => h.pending === 0 && h.daily === 0);
      expect(left).to.deep.equal({ files: 0, pending: 0, daily: 0 });
    });

    it('when the owner closes a request while a tus PATCH flows through its link, then the PATCH is cut, the upload is gone and its slot is back', async () => {
      const owner = await t.account();
      const request = await newRequest(t, owner.apiKey, {});
      const base = t.url(`${linkPath(request)}/uploads`);
      const created = await call(base, { method: 'POST', headers: { ...TUS, 'Upload-Length': String(SIZE), 'Upload-Metadata': metadata({ filename: 'slow.bin' }) } });
      expect(created.status).to.equal(201);
      const url = t.server.url + created.headers.get('location');
      const sending = throttledRequest(url, { method: 'PATCH', headers: { ...TUS, ...OCTETS, 'Upload-Offset': '0' }, size: SIZE, bytesPerSecond: RATE });
      await sleep(2000);
      const closedAt = Date.now();
      expect((await call(t.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: owner.apiKey })).status).to.equal(200);
      const outcome = await sending.outcome;
      expect(outcome.status, JSON.stringify(outcome.body)).to.equal(404);
      expect(outcome.body.error.code).to.equal('request_not_found');
      expect(outcome.at - closedAt).to.be.below(5000);
      const left = await eventually(() => holdings(owner.accountId), (h) => h.pending === 0 && h.daily === 0);
      expect(left).to.deep.equal({ files: 0, pending: 0, daily: 0 });
      expect(await t.server.db.prisma.resumableUpload.count({ where: { accountId: owner.accountId } })).to.equal(0);
    });
  });
}
