// What a load tester reads at the end of `dropstream loadtest` (issue 39):
// the summary table says what the JSON says; a run the plan's limits refused
// says so and does not knock again before Retry-After; --setup runs on a plan
// and account of its own and leaves neither behind.
import { expect } from 'chai';
import { loadtest } from '../../src/cli/loadtest/index.js';
import { TABLE_COLUMNS } from '../../src/cli/loadtest/summary.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { delta, removeDir, runLoadtest, serverRequests, setups } from './run.js';

/** The printed table's rows by kind (the totals row is "total"), each as the columns' texts. */
function tableRows(printed: string): Map<string, Record<string, string>> {
  const lines = printed.split('\n');
  const head = lines.findIndex((line) => line.trim().split(/\s{2,}|\s(?=\S)/)[0] === 'kind' && line.includes('MB/s'));
  expect(head, `a table in:\n${printed}`).to.be.at.least(0);
  const rows = new Map<string, Record<string, string>>();
  for (const line of lines.slice(head + 1)) {
    // The kind is padded to 16 columns (kinds have spaces: "tus POST"); the numbers follow.
    const numbers = line.slice(16).trim().split(/\s+/);
    if (numbers.length !== TABLE_COLUMNS.length - 1 || !numbers.every((n) => /^[0-9.]+$/.test(n))) break;
    rows.set(line.slice(0, 16).trim(), Object.fromEntries(TABLE_COLUMNS.slice(1).map((c, i) => [c, numbers[i]!])));
  }
  return rows;
}

const asPrinted = (k: { requests: number; errors: number; throttled: number; p50: number; p90: number; p99: number; max: number; mbPerSecond: number }) => ({
  requests: String(k.requests),
  errors: String(k.errors),
  throttled: String(k.throttled),
  'p50 ms': k.p50.toFixed(1),
  'p90 ms': k.p90.toFixed(1),
  'p99 ms': k.p99.toFixed(1),
  'max ms': k.max.toFixed(1),
  'MB/s': k.mbPerSecond.toFixed(2),
});

describe('dropstream loadtest: what the run says at the end', function () {
  this.timeout(60_000);
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite');
  });
  after(() => t?.close());

  it('when a run ends, then stdout carries a summary table whose every number is the JSON summary\'s, and the verdict', async () => {
    const { apiKey } = await t.account();
    const { code, summary, dir, stdout } = await runLoadtest(t, apiKey, ['mixed', '--concurrency', '2', '--count', '14', '--size', `${64 * 1024}`, '--duration', '15s', '--mix', 'uploads=2,downloads=2,metadata=2']);
    await removeDir(dir);
    expect(code).to.equal(0);
    const rows = tableRows(stdout);
    expect([...rows.keys()].sort()).to.deep.equal([...Object.keys(summary.kinds), 'total'].sort());
    for (const [kind, k] of Object.entries(summary.kinds as Record<string, any>)) expect(rows.get(kind), kind).to.deep.equal(asPrinted(k));
    const { requests, errors, throttled, p50Ms: p50, p90Ms: p90, p99Ms: p99, maxMs: max, mbPerSecond } = summary;
    expect(rows.get('total')).to.deep.equal(asPrinted({ requests, errors, throttled, p50, p90, p99, max, mbPerSecond }));
    expect(summary.verdict.ok).to.equal(true);
    expect(stdout).to.include(`PASS: ${summary.verdict.headline}`);
    expect(stdout).to.include(`cleanup (not measured): deleted ${summary.filesUploaded} of ${summary.filesUploaded} files`);
  });

  it('when --json - is given, then stdout is the JSON alone and the table goes to stderr', async () => {
    const { apiKey } = await t.account();
    const printed = { stdout: '', stderr: '' };
    const code = await loadtest(['metadata', '--count', '3', '--rate', '50', '--size', '1000', '--concurrency', '1', '--server', t.server.url, '--key', apiKey, '--json', '-', '--quiet'], {}, {
      stdout: { write: (text: string) => (printed.stdout += text) },
      stderr: { write: (text: string) => (printed.stderr += text) },
    });
    expect(code).to.equal(0);
    const summary = JSON.parse(printed.stdout);
    expect(summary.requests).to.be.at.least(4);
    expect(tableRows(printed.stderr).get('total')?.requests).to.equal(String(summary.requests));
  });

  it('when --progress is given (a terminal\'s default), then stderr has the live status line; with --quiet, none', async () => {
    const { apiKey } = await t.account();
    const base = ['metadata', '--count', '4', '--rate', '2', '--size', '1000', '--concurrency', '1'];
    const live = await runLoadtest(t, apiKey, [...base, '--progress']);
    await removeDir(live.dir);
    expect(live.stderr).to.match(/\r\u001b\[K[0-9]+ s {2}out [0-9.]+ MiB\/s {2}in [0-9.]+ MiB\/s {2}[0-9]+ requests {2}0 errors {2}0 throttled {2}server RSS [0-9]+ MiB\n/);
    const quiet = await runLoadtest(t, apiKey, [...base, '--quiet']);
    await removeDir(quiet.dir);
    expect(quiet.stderr).to.not.include('\u001b[K');
  });

  it('when --setup meets a key, no admin access or --keep, then one line says what to change, before any load', async () => {
    const server = ['--server', t.server.url];
    const admin = ['--admin-url', t.server.adminUrl, '--admin-token', t.server.adminToken];
    const refused = async (args: string[]) => (await loadtest(['uploads', ...server, ...args], {}).catch((err: Error) => err)) as Error;
    expect((await refused(['--setup', '--key', 'k', ...admin])).message).to.equal('--setup runs on an account of its own: leave out --key (and DROPSTREAM_API_KEY)');
    expect((await refused(['--setup'])).message).to.equal('--setup needs --admin-url and --admin-token (it creates a plan and an account)');
    expect((await refused([...admin, '--keep'])).message).to.equal("--keep cannot go with --setup: the run's account is removed at the end, with its files");
    expect((await refused([])).message).to.match(/^no API key: pass --key/);
  });

  it('when admin access is given without a key, then the run has a plan and account of its own, unthrottled, and removes both with its files', async () => {
    const plansBefore = (await t.admin('GET', '/admin/plans')).plans;
    const { code, summary, dir, stderr } = await runLoadtest(t, undefined, ['uploads', '--concurrency', '4', '--count', '12', '--size', '5000', '--duration', '15s']);
    await removeDir(dir);
    expect(code).to.equal(0);
    expect(summary.setup.plan).to.match(/^loadtest-[0-9a-f]{8}$/);
    expect(stderr).to.include(`plan ${summary.setup.plan}, account ${summary.setup.accountId}`);
    expect(summary.kinds.upload.statuses).to.deep.equal({ 201: 12 });
    expect(summary.cleanup).to.include({ deleted: 12, failed: 0 });
    expect(summary.setup.removed).to.equal(true);
    expect((await t.admin('GET', '/admin/plans')).plans).to.deep.equal(plansBefore);
    const gone = await fetch(`${t.server.adminUrl}/admin/accounts/${summary.setup.accountId}`, {
      method: 'PATCH',
      headers: { Authorization: `Bearer ${t.server.adminToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ plan: 'pro' }),
    });
    expect(gone.status, 'the account is gone').to.equal(404);
  });
});

// The run was against PostgreSQL + Redis (the limiter in Redis): both setups.
for (const setup of setups) {
  describe(`dropstream loadtest on a throttled plan (${setup.name})`, function () {
    this.timeout(60_000);
    let server: Awaited<ReturnType<(typeof setups)[number]['start']>>;
    before(async () => {
      server = await setup.start();
    });
    after(() => server?.close());

    it('when the plan\'s per-minute limit refuses the run, then it sends at most the limit plus one refusal per worker, says it measured the limiter, and fails with --max-throttled-rate', async () => {
      // 6 requests a minute, 3 workers, 8 s: the window outlasts the run, so after
      // the 6 the first refusals' Retry-After (about 55 s) ends every worker.
      await server.t.plan('one-a-ten-seconds', { api_access: true, requests_per_minute: 6, requests_per_day: 10_000, max_file_size: 1_000_000, daily_uploads: 1000 });
      const { apiKey } = await server.t.account('one-a-ten-seconds');
      const counted = await serverRequests(server.t);
      const began = Date.now();
      const { code, summary, dir, stdout } = await runLoadtest(server.t, apiKey, [
        'mixed', '--concurrency', '3', '--count', '100000', '--size', '4000', '--duration', '8s', '--mix', 'uploads=1,resumable=1,metadata=1', '--keep', '--max-throttled-rate', '0.05',
      ]);
      await removeDir(dir);
      const seen = [...delta(counted, await serverRequests(server.t)).values()].reduce((sum, n) => sum + n, 0);
      expect(seen, 'requests the server saw').to.be.at.most(6 + 3);
      expect(summary.requests).to.be.at.most(6 + 3);
      expect(summary.throttled).to.be.at.least(1);
      expect(Date.now() - began, 'the run ended once every worker was refused past its end').to.be.below(8000);
      expect(summary.throttledRate).to.be.above(0.05);
      expect(summary.verdict.ok).to.equal(false);
      expect(summary.verdict.headline).to.match(/^the plan's limits refused [0-9]+% of requests: this run measured the limiter; see --setup/);
      expect(stdout).to.include(`FAIL: ${summary.verdict.headline}`);
      expect(code).to.equal(1);
      expect(summary.thresholds.broken.join()).to.match(/^throttled rate .* > --max-throttled-rate 0.05$/);
    });
  });
}
