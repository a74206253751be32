// `dropstream loadtest` as an operator runs it: through bin/dropstream.js in
// a process of its own (the compiled CLI: `npm run build` first), not the
// function in this process. Only the exit code and that the JSON summary is
// a file holding a JSON object are checked here: what the summary says is
// scenarios.test.ts's and report.test.ts's.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { envWithoutConfig, runToExit } from '../helpers/run-to-exit.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('dropstream loadtest through bin/', function () {
  this.timeout(60_000);
  let t: TestServer;
  let key: string;
  let dir: string;
  before(async () => {
    t = await startTestServer('pglite');
    ({ apiKey: key } = await t.account());
    dir = await mkdtemp(join(tmpdir(), 'dropstream-loadtest-bin-'));
  });
  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const loadtest = (args: string[]) =>
    runToExit(['bin/dropstream.js', 'loadtest', ...args], { env: envWithoutConfig(), deadlineMs: 45_000 });

  it('when a bounded run meets its thresholds, then it exits 0 and writes its JSON summary to --json', async () => {
    const json = join(dir, 'ok.json');
    const result = await loadtest(['metadata', '--server', t.server.url, '--key', key, '--count', '20', '--rate', '50', '--json', json, '--max-error-rate', '0']);
    expect(result.signal, result.stderr).to.equal(null);
    expect(result.code, result.stderr).to.equal(0);
    const summary: unknown = JSON.parse(await readFile(json, 'utf8'));
    expect(summary).to.be.an('object').and.not.be.an('array');
  });

  it('when a run breaks a threshold, then it exits 1, names it on stderr, and still writes its summary', async () => {
    const json = join(dir, 'broken.json');
    // A key the server refuses: every request is an error, and --max-error-rate 0 allows none.
    const result = await loadtest(['metadata', '--server', t.server.url, '--key', 'ds_live_not-a-key', '--count', '10', '--rate', '50', '--json', json, '--max-error-rate', '0']);
    expect(result.signal, result.stderr).to.equal(null);
    expect(result.code, result.stderr).to.equal(1);
    expect(result.stderr).to.include('--max-error-rate');
    expect(JSON.parse(await readFile(json, 'utf8'))).to.be.an('object').and.not.be.an('array');
  });
});
