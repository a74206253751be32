// A revoked link ends its downloads in flight (issue 38, 7): revoking a link
// or deleting its file on one instance ends the downloads of it on every
// instance within seconds, where they used to run to their end (a 20 MiB
// download at 1 MB/s finished in full after revocation). The notice goes
// over PostgreSQL NOTIFY, or Redis when set; a check of the links in flight
// every CHECK_MS ends them even when no notice comes.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CHECK_MS } from '../../src/links/live-downloads.js';
import { call, upload } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTwoInstances, type TestServer } from '../helpers/server.js';
import { trickle, type Trickle } from '../helpers/trickle.js';

const SIZE = 32 * 1024 * 1024;
/** Well under CHECK_MS: an end this quick came by the notice, not the check. */
const NOTICE_MS = 1500;

const settings = [
  { label: 'PostgreSQL NOTIFY', env: {} as Record<string, string> },
  ...(redisUrl ? [{ label: 'Redis', env: () => ({ REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() }) }] : []),
];

if (backends.includes('postgresql')) {
  for (const { label, env } of settings) {
    describe(`downloads of a revoked link across two instances (${label})`, function () {
      this.timeout(60_000);
      let a: TestServer;
      let b: TestServer;
      let close: () => Promise<void>;
      let dataDir: string;
      let key: string;
      const downloads: Trickle[] = [];

      before(async () => {
        // One local store for both, through one folder, as a network file system would share it.
        dataDir = await mkdtemp(join(tmpdir(), 'dropstream-revoke-'));
        const shared = { ...(typeof env === 'function' ? env() : env), DATA_DIR: dataDir };
        ({ a, b, close } = await startTwoInstances(shared, shared));
        key = (await a.account()).apiKey;
      });
      afterEach(() => downloads.splice(0).forEach((d) => d.close()));
      after(async () => {
        await close?.();
        await rm(dataDir, { recursive: true, force: true });
      });

      /** A 32 MiB file uploaded on A, a slow download of it running on B, and the file's primary link. */
      async function downloadingOnB() {
        const res = await upload(a.server.url, key, [{ name: 'file', filename: 'big.bin', content: randomBytes(SIZE) }]);
        expect(res.status).to.equal(201);
        const file = res.body;
        // About 1 MB/s: 30 s for the whole file.
        const download = trickle(b.url(file.public_link), 50);
        downloads.push(download);
        await download.started;
        const links = (await call(a.url(`/api/v1/files/${file.file_id}/links`), { key })).body.links;
        return { download, fileId: file.file_id as number, linkId: links[0].link_id as string };
      }

      it(`when a link is revoked on A, then its download on B ends within ${NOTICE_MS} ms, long before its last byte`, async () => {
        const { download, fileId, linkId } = await downloadingOnB();
        const revoked = Date.now();
        expect((await call(a.url(`/api/v1/files/${fileId}/links/${linkId}`), { method: 'DELETE', key })).status).to.equal(200);
        const ended = await download.endedWithin(NOTICE_MS);
        expect(ended, 'the download still runs').to.not.equal(undefined);
        expect(ended!.at - revoked).to.be.below(NOTICE_MS);
        expect(ended!.bytes).to.be.below(SIZE / 2);
      });

      it(`when the file is deleted on A, then its download on B ends within ${NOTICE_MS} ms`, async () => {
        const { download, fileId } = await downloadingOnB();
        const deleted = Date.now();
        expect((await call(a.url(`/api/v1/files/${fileId}`), { method: 'DELETE', key })).status).to.equal(200);
        const ended = await download.endedWithin(NOTICE_MS);
        expect(ended, 'the download still runs').to.not.equal(undefined);
        expect(ended!.at - deleted).to.be.below(NOTICE_MS);
        expect(ended!.bytes).to.be.below(SIZE / 2);
      });

      it(`when a link goes without a notice (removed in the database), then its download ends at the next check, within ${CHECK_MS / 1000} s and a second`, async () => {
        const { download, linkId } = await downloadingOnB();
        await b.server.db.prisma.link.delete({ where: { id: linkId } });
        const ended = await download.endedWithin(CHECK_MS + 1000);
        expect(ended, 'the download still runs').to.not.equal(undefined);
        expect(ended!.bytes).to.be.below(SIZE / 2);
      });
    });
  }
}
