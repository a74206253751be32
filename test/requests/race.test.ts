// max_files exact under concurrency on two instances (issue 45): outsiders
// racing through both instances of one PostgreSQL and Redis on a request
// with max_files 3 get exactly 3 files stored and 5 refusals, and leave no
// orphan object, pending record or row behind.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describeWithPostgres } from '../helpers/databases.js';
import { eventually } from '../helpers/raw-upload.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTwoInstances, type TestServer } from '../helpers/server.js';
import { call } from '../helpers/client.js';
import { metadata, TUS } from '../helpers/tus.js';
import { linkPath, newRequest, sendFile } from './helpers.js';

async function objectsIn(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile() && !join(e.parentPath, e.name).includes(join('objects', '.tmp'))).map((e) => e.name);
}

// Without TEST_REDIS_URL, helpers/redis.ts names the Redis suites under "Did not run".
if (redisUrl) describeWithPostgres('file requests: max_files raced on two instances (PostgreSQL, Redis)', function () {
  this.timeout(60_000);
  let a: TestServer;
  let b: TestServer;
  let close: () => Promise<void>;
  before(async () => {
    // One store folder for both, as a shared file system (or one bucket) would be.
    const env = { REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() };
    const two = await startTwoInstances(env, env);
    ({ a, b, close } = two);
  });
  after(async () => close?.());

  it('when 8 outsiders race plain uploads on max_files 3 across both instances, then exactly 3 are stored, 5 get 410 request_full, and nothing is left over', async () => {
    const owner = await a.account();
    const request = await newRequest(a, owner.apiKey, { max_files: 3 });
    const body = randomBytes(256 * 1024);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => sendFile((i % 2 ? b : a).server.url, request, `f${i}.bin`, body)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses, JSON.stringify(answers.map((r) => r.body))).to.deep.equal([201, 201, 201, 410, 410, 410, 410, 410]);
    for (const refused of answers.filter((r) => r.status === 410)) expect(refused.body.error.code).to.equal('request_full');
    const { prisma } = a.server.db;
    expect(await prisma.file.count({ where: { requestId: request.request_id } })).to.equal(3);
    expect(await prisma.file.count({ where: { accountId: owner.accountId } })).to.equal(3);
    // Refused uploads dropped their records (and gave their daily slots back) and removed their objects.
    const pending = await eventually(() => prisma.pendingObject.count(), (n) => n === 0);
    expect(pending).to.equal(0);
    const daily = await prisma.dailyUpload.findMany({ where: { accountId: owner.accountId } });
    expect(daily.reduce((sum, d) => sum + d.count, 0)).to.equal(3);
    const objects = [...(await objectsIn(join(a.dataDir, 'objects'))), ...(await objectsIn(join(b.dataDir, 'objects')))];
    expect(objects).to.have.length(3);
  });

  it('when 8 outsiders race tus creations on max_files 3 across both instances, then exactly 3 uploads exist and 5 get 410 request_full', async () => {
    const owner = await a.account();
    const request = await newRequest(a, owner.apiKey, { max_files: 3 });
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        call(`${(i % 2 ? b : a).server.url}${linkPath(request)}/uploads`, { method: 'POST', headers: { ...TUS, 'Upload-Length': '5', 'Upload-Metadata': metadata({ filename: `t${i}` }) } }),
      ),
    );
    expect(answers.map((r) => r.status).sort()).to.deep.equal([201, 201, 201, 410, 410, 410, 410, 410]);
    const { prisma } = a.server.db;
    expect(await prisma.resumableUpload.count({ where: { accountId: owner.accountId } })).to.equal(3);
    expect(await prisma.pendingObject.count({ where: { requestId: request.request_id } })).to.equal(3);
    const daily = await prisma.dailyUpload.findMany({ where: { accountId: owner.accountId } });
    expect(daily.reduce((sum, d) => sum + d.count, 0)).to.equal(3);
  });
});
