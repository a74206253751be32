// `dropstream loadtest` against a server of the test's own: every scenario's
// summary counts what the server counted, and the run leaves the account as
// it found it (or, with --keep, holds exactly what the summary says it kept).
import { expect } from 'chai';
import type { TestServer } from '../helpers/server.js';
import { accountState, delta, matches, removeDir, runLoadtest, serverRequests, setups, sorted, summaryRequests } from './run.js';

const KiB = 1024;
const SMALL = ['--concurrency', '2', '--duration', '15s'];

/** The scenarios, small: each run takes a second or two. */
const SCENARIOS: { name: string; args: string[]; check(summary: any): void }[] = [
  {
    name: 'uploads (with a slow client beside them)',
    args: ['uploads', '--count', '6', '--size', `${200 * KiB}`, '--slow-clients', '1', '--slow-rate', `${256 * KiB}`],
    check: (s) => {
      expect(s.kinds.upload.requests).to.equal(6);
      expect(s.kinds.upload.statuses).to.deep.equal({ 201: 6 });
    },
  },
  {
    name: 'resumable, cut every 300 KiB',
    args: ['resumable', '--count', '2', '--size', `${700 * KiB}`, '--cut-every', `${300 * KiB}`],
    check: (s) => {
      expect(s.kinds.resumable.requests, 'uploads finished').to.equal(2);
      expect(s.cuts, 'connections cut').to.be.at.least(2);
      expect(s.kinds['tus PATCH'].statuses['204']).to.equal(2);
    },
  },
  {
    name: 'downloads of 1000-byte ranges',
    args: ['downloads', '--count', '8', '--size', `${100 * KiB}`, '--range', '1000'],
    check: (s) => {
      expect(s.kinds.range.statuses).to.deep.equal({ 206: 8 });
      expect(s.kinds.range.bytesIn).to.equal(8000);
    },
  },
  {
    name: 'whole downloads',
    args: ['downloads', '--count', '4', '--size', `${100 * KiB}`],
    check: (s) => {
      expect(s.kinds.download.statuses).to.deep.equal({ 200: 4 });
      expect(s.kinds.download.bytesIn).to.equal(4 * 100 * KiB);
    },
  },
  {
    name: 'metadata at 40 requests per second',
    args: ['metadata', '--count', '12', '--rate', '40', '--size', '1000'],
    check: (s) => {
      const answered = ['list', 'stats', 'info'].reduce((n, k) => n + (s.kinds[k]?.statuses['200'] ?? 0), 0);
      expect(answered).to.equal(12);
      // 12 requests at 40/s are spread over at least 11/40 s.
      expect(s.elapsedSeconds).to.be.at.least(0.27);
    },
  },
  {
    name: 'slow clients alone',
    args: ['slow', '--duration', '4s', '--slow-clients', '2', '--size', `${48 * KiB}`, '--slow-rate', `${96 * KiB}`],
    check: (s) => {
      const slow = (s.kinds['slow upload']?.requests ?? 0) + (s.kinds['slow download']?.requests ?? 0);
      expect(slow, 'slow requests answered').to.be.at.least(2);
      expect(s.elapsedSeconds).to.be.at.least(4);
    },
  },
  {
    name: 'mixed',
    args: ['mixed', '--count', '10', '--size', `${64 * KiB}`, '--mix', 'uploads=2,downloads=2,metadata=1'],
    check: (s) => expect(s.operations).to.equal(10),
  },
];

for (const setup of setups) {
  describe(`dropstream loadtest (${setup.name})`, function () {
    this.timeout(60_000);
    let server: Awaited<ReturnType<Setup['start']>>;
    let t: TestServer;
    let key: string;
    before(async () => {
      server = await setup.start();
      t = server.t;
    });
    after(() => server?.close());
    beforeEach(async () => {
      ({ apiKey: key } = await t.account());
    });

    for (const scenario of SCENARIOS) {
      it(`${scenario.name}: the summary counts what the server counted, and the account is left as it was`, async () => {
        const before = await accountState(t, key);
        const counted = await serverRequests(t);
        const { code, summary, dir } = await runLoadtest(t, key, [...SMALL, ...scenario.args]);
        await removeDir(dir);
        expect(code).to.equal(0);
        scenario.check(summary);
        if (!scenario.name.startsWith('resumable')) expect(summary.errors, JSON.stringify(summary.kinds)).to.equal(0);
        expect(summary.cleanup).to.include({ deleted: summary.filesUploaded, failed: 0 });
        expect(summary.kinds, 'the cleanup is not counted as load').to.not.have.property('delete');
        // A finished tus upload has a row of its own but is no request: its POST, PATCHes and HEADs are.
        const httpRequests = Object.entries(summary.kinds as Record<string, { requests: number }>).reduce((n, [kind, k]) => n + (kind === 'resumable' ? 0 : k.requests), 0);
        expect(summary.requests, 'the total counts HTTP requests only').to.equal(httpRequests);
        expect(summary.server.scrapes).to.be.at.least(2);
        // The server counts a request as its answer ends: allow it that instant.
        const expected = summaryRequests(summary);
        let seen = new Map<string, number>();
        for (const until = Date.now() + 5000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
          seen = delta(counted, await serverRequests(t));
          if (matches(seen, expected)) break;
        }
        expect(matches(seen, expected), `server ${JSON.stringify(sorted(seen))}, summary ${JSON.stringify(sorted(expected.counts))} + lost ${JSON.stringify(sorted(expected.lost))}`).to.equal(true);
        expect(await accountState(t, key)).to.deep.equal(before);
      });
    }

    it('with --keep, the account holds exactly the files the summary names', async () => {
      const { summary, dir } = await runLoadtest(t, key, ['uploads', ...SMALL, '--count', '3', '--size', '5000', '--keep']);
      await removeDir(dir);
      expect(summary.cleanup).to.include({ deleted: 0, failed: 0 });
      const state = await accountState(t, key);
      expect(state.stats).to.deep.equal({ total_files: 3, total_size: 15000, reserved_size: 0 });
      expect([...state.files].sort()).to.deep.equal([...summary.kept].sort());
    });
  });
}

type Setup = (typeof setups)[number];
