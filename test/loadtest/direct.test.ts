// `dropstream loadtest direct` and the direct share of `mixed` (issue 55):
// against a server with S3_DIRECT_UPLOADS on s3rver, the uploads go to the
// store in parts, the summary reports them in MB/s as the other upload
// scenarios, counts what the server counted, and the run leaves the account
// as it found it. Against a server without them, mixed has no direct share
// and its probe is no error.
import { expect } from 'chai';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { accountState, delta, matches, removeDir, runLoadtest, serverRequests, sorted, summaryRequests } from './run.js';

const MiB = 1024 * 1024;

/** The server counts a request as its answer ends: polled for that instant, then compared. */
async function expectServerCounted(t: TestServer, counted: Map<string, number>, summary: any): Promise<void> {
  const expected = summaryRequests(summary);
  let seen = new Map<string, number>();
  for (const until = Date.now() + 5000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
    seen = delta(counted, await serverRequests(t));
    if (matches(seen, expected)) break;
  }
  expect(matches(seen, expected), `server ${JSON.stringify(sorted(seen))}, summary ${JSON.stringify(sorted(expected.counts))} + lost ${JSON.stringify(sorted(expected.lost))}`).to.equal(true);
}

describe('dropstream loadtest direct (uploads straight to the store)', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let t: TestServer;
  before(async () => {
    s3 = await startTestS3();
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('loadtest-direct')), S3_DIRECT_UPLOADS: 'true' });
  });
  after(async () => {
    await t?.close();
    await s3?.close();
  });

  it('when the server offers direct uploads, then the direct scenario uploads in parts to the store, reports MB/s, counts what the server counted and cleans up', async () => {
    const { apiKey } = await t.account();
    const before = await accountState(t, apiKey);
    const counted = await serverRequests(t);
    // 20 MiB: two parts of the server's 16 MiB each.
    const { code, summary, dir } = await runLoadtest(t, apiKey, ['direct', '--concurrency', '2', '--count', '3', '--size', `${20 * MiB}`, '--duration', '30s']);
    await removeDir(dir);
    expect(code).to.equal(0);
    expect(summary.errors, JSON.stringify(summary.kinds)).to.equal(0);
    expect(summary.kinds.direct).to.include({ requests: 3, bytesOut: 3 * 20 * MiB });
    expect(summary.kinds.direct.statuses).to.deep.equal({ 201: 3 });
    expect(summary.kinds.direct.mbPerSecond).to.be.above(0);
    expect(summary.kinds['direct PUT'].statuses).to.deep.equal({ 200: 6 });
    // The parts' bytes are counted once, on the upload's row.
    expect(summary.kinds['direct PUT'].bytesOut).to.equal(0);
    expect(summary.bytesOut).to.equal(3 * 20 * MiB);
    expect(summary.kinds['direct complete'].statuses).to.deep.equal({ 201: 3 });
    // A finished upload has a row of its own but is no request: its JSON requests and PUTs are.
    const httpRequests = Object.entries(summary.kinds as Record<string, { requests: number }>).reduce((n, [kind, k]) => n + (kind === 'direct' ? 0 : k.requests), 0);
    expect(summary.requests).to.equal(httpRequests);
    expect(summary.cleanup).to.include({ deleted: 3, failed: 0 });
    await expectServerCounted(t, counted, summary);
    expect(await accountState(t, apiKey)).to.deep.equal(before);
  });

  it('when the server offers direct uploads and --mix is not given, then mixed gives direct uploads a share', async () => {
    const { apiKey } = await t.account();
    const counted = await serverRequests(t);
    const { code, summary, dir } = await runLoadtest(t, apiKey, ['mixed', '--concurrency', '2', '--count', '30', '--size', `${64 * 1024}`, '--duration', '30s']);
    await removeDir(dir);
    expect(code).to.equal(0);
    expect(summary.errors, JSON.stringify(summary.kinds)).to.equal(0);
    expect(summary.parameters.mix).to.deep.equal({ uploads: 3, resumable: 1, direct: 1, downloads: 4, metadata: 2 });
    expect(summary.kinds['direct offer'].statuses).to.deep.equal({ 200: 1 });
    await expectServerCounted(t, counted, summary);
  });
});

describe('dropstream loadtest mixed against a server without direct uploads', function () {
  this.timeout(60_000);
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite');
  });
  after(() => t?.close());

  it('when the server makes no offer (404), then mixed has no direct share and the probe is no error', async () => {
    const { apiKey } = await t.account();
    const { code, summary, dir } = await runLoadtest(t, apiKey, ['mixed', '--concurrency', '2', '--count', '10', '--size', `${64 * 1024}`, '--duration', '30s']);
    await removeDir(dir);
    expect(code).to.equal(0);
    expect(summary.parameters.mix.direct).to.equal(0);
    expect(summary.kinds['direct offer']).to.include({ requests: 1, errors: 0 });
    expect(summary.kinds['direct offer'].statuses).to.deep.equal({ 404: 1 });
    expect(summary.errors, JSON.stringify(summary.kinds)).to.equal(0);
  });

  it('when the direct scenario is asked of it, then the run says the server offers none', async () => {
    const { apiKey } = await t.account();
    const error = await runLoadtest(t, apiKey, ['direct', '--count', '1']).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(error?.message).to.match(/does not offer uploads straight to its store/);
  });
});
