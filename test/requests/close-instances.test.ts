// Closing a file request on one instance cuts the uploads flowing through it
// on every other (issue 50, 5), as revoking a link cuts its downloads: the
// notice goes over PostgreSQL NOTIFY, or Redis when set; a check of the
// requests of uploads in flight every CHECK_MS cuts them even when no notice
// comes.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CHECK_MS } from '../../src/requests/live-uploads.js';
import { call } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { eventually, sleep } from '../helpers/raw-upload.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTwoInstances, type TestServer } from '../helpers/server.js';
import { metadata, OCTETS, TUS } from '../helpers/tus.js';
import { linkPath, newRequest, throttledRequest, throttledSend } from './helpers.js';

const SIZE = 3_000_000;
const RATE = 300_000;
/** Well under CHECK_MS: a cut this quick came by the notice, not the check. */
const NOTICE_MS = 1500;

const settings = [
  { label: 'PostgreSQL NOTIFY', env: {} as Record<string, string> },
  ...(redisUrl ? [{ label: 'Redis', env: () => ({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }) }] : []),
];

if (backends.includes('postgresql')) {
  for (const { label, env } of settings) {
    describe(`file requests: a close on one instance cuts uploads on another (${label})`, function () {
      this.timeout(60_000);
      let a: TestServer;
      let b: TestServer;
      let close: () => Promise<void>;
      let dataDir: string;

      before(async () => {
        // One local store for both, through one folder, as a network file system would share it.
        dataDir = await mkdtemp(join(tmpdir(), 'dropstream-close-'));
        const shared = { ...(typeof env === 'function' ? env() : env), DATA_DIR: dataDir, GC_INTERVAL: '0' };
        ({ a, b, close } = await startTwoInstances(shared, shared));
      });
      after(async () => {
        await close?.();
        await rm(dataDir, { recursive: true, force: true });
      });

      async function nothingKept(accountId: number) {
        const { prisma } = a.server.db;
        const held = await eventually(() => prisma.pendingObject.count({ where: { accountId } }), (n) => n === 0);
        expect(held).to.equal(0);
        expect(await prisma.file.count({ where: { accountId } })).to.equal(0);
        expect((await prisma.dailyUpload.findMany({ where: { accountId } })).reduce((sum, d) => sum + d.count, 0)).to.equal(0);
      }

      it(`when a request is closed on A, then a plain upload flowing through B is cut within ${NOTICE_MS} ms with 404 request_not_found, and nothing is kept`, async () => {
        const owner = await a.account();
        const request = await newRequest(a, owner.apiKey, {});
        const sending = throttledSend(b.server.url, request, SIZE, RATE);
        // Just past B's first check of its uploads' requests (CHECK_MS after the upload began): the next is 2.7 s away.
        await sleep(CHECK_MS + 300);
        expect((await call(a.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: owner.apiKey })).status).to.equal(200);
        const closedAt = Date.now();
        const outcome = await sending.outcome;
        expect(outcome.status, JSON.stringify(outcome.body)).to.equal(404);
        expect(outcome.body.error.code).to.equal('request_not_found');
        expect(outcome.at - closedAt).to.be.below(NOTICE_MS);
        await nothingKept(owner.accountId);
      });

      it(`when a request is closed on A, then a tus PATCH flowing through B is cut within ${NOTICE_MS} ms and the upload removed`, async () => {
        const owner = await a.account();
        const request = await newRequest(a, owner.apiKey, {});
        const created = await call(b.url(`${linkPath(request)}/uploads`), { method: 'POST', headers: { ...TUS, 'Upload-Length': String(SIZE), 'Upload-Metadata': metadata({ filename: 'slow.bin' }) } });
        expect(created.status).to.equal(201);
        const sending = throttledRequest(b.server.url + created.headers.get('location'), { method: 'PATCH', headers: { ...TUS, ...OCTETS, 'Upload-Offset': '0' }, size: SIZE, bytesPerSecond: RATE });
        await sleep(CHECK_MS + 300);
        expect((await call(a.url(`/api/v1/requests/${request.request_id}`), { method: 'DELETE', key: owner.apiKey })).status).to.equal(200);
        const closedAt = Date.now();
        const outcome = await sending.outcome;
        expect(outcome.status, JSON.stringify(outcome.body)).to.equal(404);
        expect(outcome.at - closedAt).to.be.below(NOTICE_MS);
        await nothingKept(owner.accountId);
        expect(await eventually(() => a.server.db.prisma.resumableUpload.count({ where: { accountId: owner.accountId } }), (n) => n === 0)).to.equal(0);
      });

      it(`when a request is closed without a notice (in the database), then its upload is cut at the next check, within ${CHECK_MS / 1000} s and a second`, async () => {
        const owner = await a.account();
        const request = await newRequest(a, owner.apiKey, {});
        const sending = throttledSend(b.server.url, request, SIZE, RATE);
        await sleep(1000);
        await a.server.db.prisma.fileRequest.update({ where: { id: request.request_id }, data: { closedAt: new Date() } });
        const closedAt = Date.now();
        const outcome = await sending.outcome;
        expect(outcome.status, JSON.stringify(outcome.body)).to.equal(404);
        expect(outcome.at - closedAt).to.be.below(CHECK_MS + 1000);
        expect(outcome.sentAtAnswer).to.be.below(SIZE);
      });
    });
  }
}
