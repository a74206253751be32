// Uploads through a file request hold their place, daily slot and bytes for
// at most REQUEST_UPLOAD_EXPIRY (issue 50, 4): an unfinished tus upload
// lived RESUMABLE_EXPIRY (24 h), renewed by every PATCH. The setting is
// shortened here to a few seconds instead of waiting an hour.
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { testClock } from '../helpers/clock.js';
import { backends } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { metadata, OCTETS, TUS } from '../helpers/tus.js';
import { linkPath, newRequest, throttledRequest, throttledSend } from './helpers.js';

const EXPIRY = 4;

for (const backend of backends) {
  describe(`file requests: REQUEST_UPLOAD_EXPIRY (${backend})`, function () {
    this.timeout(60_000);
    let t: TestServer;
    // Moved past the expiry where nothing flows; a body in flight is cut on the wall clock (its timer).
    const clock = testClock();
    before(async () => {
      // No sweep schedule: what comes back at the expiry comes back without one.
      t = await startTestServer(backend, { GC_INTERVAL: '0', REQUEST_UPLOAD_EXPIRY: String(EXPIRY) }, undefined, { clock });
    });
    after(async () => t?.close());

    const createThroughLink = (request: { upload_link: string }, length: number) =>
      call(t.url(`${linkPath(request)}/uploads`), { method: 'POST', headers: { ...TUS, 'Upload-Length': String(length), 'Upload-Metadata': metadata({ filename: 'x.bin' }) } });

    async function daily(accountId: number): Promise<number> {
      return (await t.server.db.prisma.dailyUpload.findMany({ where: { accountId } })).reduce((sum, d) => sum + d.count, 0);
    }

    it('when a tus upload through a request is written to, then its Upload-Expires stays within REQUEST_UPLOAD_EXPIRY of its creation, and after it its place and slot come back without a sweep', async () => {
      const { apiKey, accountId } = await t.account();
      const request = await newRequest(t, apiKey, { max_files: 1 });
      const created = await createThroughLink(request, 100);
      // The latest the upload may expire: REQUEST_UPLOAD_EXPIRY after its creation, which came before this answer.
      const limit = clock().getTime() + EXPIRY * 1000;
      expect(created.status).to.equal(201);
      const url = t.server.url + created.headers.get('location');
      expect(Date.parse(created.headers.get('upload-expires')!)).to.be.at.most(limit);
      clock.advance(1500);
      const patched = await call(url, { method: 'PATCH', headers: { ...TUS, ...OCTETS, 'Upload-Offset': '0' }, body: new Uint8Array(10) });
      expect(patched.status).to.equal(204);
      // A PATCH does not renew it past the expiry (it would give RESUMABLE_EXPIRY, a day, from now).
      expect(Date.parse(patched.headers.get('upload-expires')!)).to.be.at.most(limit);
      expect(await daily(accountId)).to.equal(1);
      // Past it: the upload is gone for its client, and the daily slot and the place come back by themselves.
      clock.advance(EXPIRY * 1000);
      const back = await eventually(() => daily(accountId), (n) => n === 0, 10_000);
      expect(back).to.equal(0);
      expect((await call(url, { method: 'HEAD', headers: TUS })).status).to.equal(404);
      expect((await createThroughLink(request, 100)).status).to.equal(201);
    });

    it('when a plain upload through a request runs past REQUEST_UPLOAD_EXPIRY, then it is cut with 410 upload_expired and nothing is kept', async () => {
      const { apiKey, accountId } = await t.account();
      const request = await newRequest(t, apiKey, {});
      // 10 s at 300 KB/s: well past the expiry.
      const outcome = await throttledSend(t.server.url, request, 3_000_000, 300_000).outcome;
      expect(outcome.status, JSON.stringify(outcome.body)).to.equal(410);
      expect(outcome.body.error.code).to.equal('upload_expired');
      expect(outcome.sentAtAnswer).to.be.below(3_000_000);
      expect(await eventually(() => daily(accountId), (n) => n === 0)).to.equal(0);
      expect(await t.server.db.prisma.file.count({ where: { accountId } })).to.equal(0);
    });

    it('when a tus PATCH through a request is still flowing at REQUEST_UPLOAD_EXPIRY, then it is cut with 410 upload_expired and the upload is removed', async () => {
      const { apiKey, accountId } = await t.account();
      const request = await newRequest(t, apiKey, {});
      const created = await createThroughLink(request, 3_000_000);
      expect(created.status).to.equal(201);
      const url = t.server.url + created.headers.get('location');
      const outcome = await throttledRequest(url, { method: 'PATCH', headers: { ...TUS, ...OCTETS, 'Upload-Offset': '0' }, size: 3_000_000, bytesPerSecond: 300_000 }).outcome;
      expect(outcome.status, JSON.stringify(outcome.body)).to.equal(410);
      expect(outcome.body.error.code).to.equal('upload_expired');
      expect(await eventually(() => daily(accountId), (n) => n === 0)).to.equal(0);
      expect(await t.server.db.prisma.resumableUpload.count({ where: { accountId } })).to.equal(0);
    });
  });
}
