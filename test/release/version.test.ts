// The version an instance runs, in every place an operator looks during a
// rolling upgrade: /healthz, /metrics' build info, the start-up line. One
// fact (package.json's version, the build's commit: src/version.ts).
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
// @ts-expect-error: a plain .mjs build script, no declarations
import { buildCommit } from '../../scripts/build-info.mjs';
import { buildInfo } from '../../src/version.js';
import { call } from '../helpers/client.js';
import { captureLog } from '../helpers/log-capture.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const root = new URL('../../', import.meta.url);
const packageVersion = (JSON.parse(await readFile(new URL('package.json', root), 'utf8')) as { version: string }).version;

describe('version: where an instance says what it runs', () => {
  let t: TestServer;
  const log = captureLog('info');
  before(async () => {
    t = await startTestServer('pglite', {}, log.logger);
  });
  after(async () => {
    await t?.close();
  });

  it("when /healthz is asked, then it names package.json's version", async () => {
    const res = await call(t.url('/healthz'));
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ status: 'ok', version: packageVersion });
  });

  it('when /metrics is scraped, then dropstream_build_info is 1 with the version and the commit as labels', async () => {
    const text = (await call(`${t.server.adminUrl}/metrics`, { key: t.server.adminToken })).text;
    const { commit } = buildInfo();
    expect(text).to.match(/^# TYPE dropstream_build_info gauge$/m);
    const lines = text.split('\n').filter((line) => line.startsWith('dropstream_build_info'));
    expect(lines).to.deep.equal([`dropstream_build_info{version="${packageVersion}",commit="${commit}"} 1`]);
  });

  it('when the server starts, then its "dropstream listening" line names the version and the commit', () => {
    const line = log.lines.find((l) => l.msg === 'dropstream listening');
    expect(line).to.include({ version: packageVersion, commit: buildInfo().commit });
  });
});

describe("version: the build's commit (scripts/build-info.mjs)", () => {
  let dir: string;
  const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dropstream-build-info-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("when the package is a git checkout, then HEAD's 12 digits, -dirty once an input changes, and DROPSTREAM_COMMIT over both", async () => {
    const repo = join(dir, 'repo');
    await mkdir(join(repo, 'src'), { recursive: true });
    await writeFile(join(repo, 'src', 'a.ts'), 'export {};\n');
    git(repo, 'init', '-q');
    git(repo, '-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '.');
    git(repo, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'first');
    const head = git(repo, 'rev-parse', '--short=12', 'HEAD');
    expect(buildCommit(repo, ['src'], {})).to.equal(head);
    await writeFile(join(repo, 'notes.txt'), 'not an input\n');
    expect(buildCommit(repo, ['src'], {}), 'a change outside the inputs').to.equal(head);
    await writeFile(join(repo, 'src', 'a.ts'), 'export const changed = 1;\n');
    expect(buildCommit(repo, ['src'], {})).to.equal(`${head}-dirty`);
    expect(buildCommit(repo, ['src'], { DROPSTREAM_COMMIT: 'abc123' })).to.equal('abc123');
  });

  it("when the package is a copy unpacked inside another checkout (git archive | tar -x), then unknown, not the other one's HEAD", async () => {
    const copy = join(dir, 'repo', 'unpacked');
    await mkdir(join(copy, 'src'), { recursive: true });
    expect(buildCommit(copy, ['src'], {})).to.equal('unknown');
    expect(buildCommit(tmpdir(), ['src'], {}), 'outside any checkout').to.equal('unknown');
  });
});
