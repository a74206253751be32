// No one account takes every upload place (issue 38, 8b): a plan without
// concurrent_uploads has the instance's default cap (ACCOUNT_UPLOAD_CONCURRENCY),
// never none, and one account holds at most its share of an instance's
// UPLOAD_CONCURRENCY places whatever its plan allows, so the rest stay open
// to the others.
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { eventually, startRawUpload, writeBytes } from '../helpers/raw-upload.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const PLAN = { api_access: true, requests_per_minute: 100_000, requests_per_day: 100_000, max_file_size: 1 << 30, daily_uploads: 1000 };

/** Uploads of `key` started and left open (their first bytes sent), until close(). */
async function holdUploads(t: TestServer, key: string, count: number) {
  const held: ReturnType<typeof startRawUpload>[] = [];
  for (let i = 0; i < count; i++) {
    const upload = startRawUpload(t.server.url, key, `held-${i}.bin`);
    await writeBytes(upload.req, 2048);
    held.push(upload);
  }
  return { close: () => held.forEach((h) => h.req.destroy()) };
}

/** Plain uploads the server is receiving now (their pending records). */
const inFlight = (t: TestServer) => t.server.db.prisma.pendingObject.count({ where: { reason: 'upload' } });

describe('upload places per account (issue 38)', function () {
  this.timeout(30_000);
  let t: TestServer;
  let held: { close(): void } | undefined;
  before(async () => {
    // 4 places: one account may hold 3 of them. Its plan's default cap is 2.
    t = await startTestServer('pglite', { UPLOAD_CONCURRENCY: '4', ACCOUNT_UPLOAD_CONCURRENCY: '2' });
    await t.plan('no-cap-set', PLAN);
    await t.plan('cap-of-100', { ...PLAN, concurrent_uploads: 100 });
  });
  afterEach(async () => {
    held?.close();
    held = undefined;
    await eventually(() => inFlight(t), (n) => n === 0);
  });
  after(() => t?.close());

  it('when a plan sets no concurrent_uploads, then its accounts have ACCOUNT_UPLOAD_CONCURRENCY, not no cap: one more is 429, and /stats says so', async () => {
    const { apiKey } = await t.account('no-cap-set');
    held = await holdUploads(t, apiKey, 2);
    await eventually(() => inFlight(t), (n) => n === 2);
    const refused = await uploadFile(t.server.url, apiKey, 'third.txt', 'x');
    expect([refused.status, refused.body.error?.code]).to.deep.equal([429, 'too_many_uploads']);
    expect((await call(t.url('/api/v1/stats'), { key: apiKey })).body.limits.concurrent_uploads).to.equal(2);
    // The plan itself still says it sets none.
    const plans = (await t.admin('GET', '/admin/plans')).plans as { name: string; concurrent_uploads: number | null }[];
    expect(plans.find((p) => p.name === 'no-cap-set')?.concurrent_uploads).to.equal(null);
  });

  it("when one account holds its share of an instance's places, then its next upload is 503 server_busy and another account still uploads", async () => {
    const greedy = await t.account('cap-of-100');
    const other = await t.account('no-cap-set');
    held = await holdUploads(t, greedy.apiKey, 3);
    await eventually(() => inFlight(t), (n) => n === 3);
    const refused = await uploadFile(t.server.url, greedy.apiKey, 'fourth.txt', 'x');
    expect([refused.status, refused.body.error?.code, refused.headers.get('retry-after')]).to.deep.equal([503, 'server_busy', '5']);
    expect((await uploadFile(t.server.url, other.apiKey, 'mine.txt', 'hello')).status).to.equal(201);
  });
});
