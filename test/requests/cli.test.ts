// `dropstream requests create|list|close` and `dropstream upload <path>
// --request <upload_link>` (issue 45), as a user runs them (the compiled
// CLI, so `npm run build` first), against a real server.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { envWithoutConfig, repoRoot, runToExit } from '../helpers/run-to-exit.js';
import { PUBLIC_URL, type TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

const bin = join(repoRoot, 'bin', 'dropstream.js');

describe('dropstream requests, and upload --request', function () {
  this.timeout(60_000);
  let t: TestServer;
  let key: string;
  let dir: string;
  let env: Record<string, string>;

  async function cli(args: string[]) {
    const result = await runToExit([bin, ...args], { cwd: dir, env, deadlineMs: 30_000 });
    return { ...result, lines: result.stdout.split('\n').filter(Boolean) };
  }
  async function json(args: string[]): Promise<any> {
    const result = await cli(args);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    expect(result.lines).to.have.length(1);
    return JSON.parse(result.lines[0]!);
  }

  before(async () => {
    t = await sharedServer('pglite');
    key = (await t.account()).apiKey;
    dir = await mkdtemp(join(tmpdir(), 'dropstream-requests-cli-'));
    env = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_') || name === 'XDG_CACHE_HOME'), DROPSTREAM_SERVER: t.server.url, DROPSTREAM_API_KEY: key, XDG_CACHE_HOME: join(dir, '.cache') };
  });
  after(async () => rm(dir, { recursive: true, force: true }));

  it('when a request is made, sent a file with upload --request (no key) and closed from the CLI, then the owner has the file and the closed link refuses the next', async () => {
    const request = await json(['requests', 'create', '--title', 'Scans', '--max-files', '2', '--expires-in', '1d', '--password', 'pw']);
    expect(request).to.include({ title: 'Scans', max_files: 2, has_password: true });
    expect((await json(['requests', 'list'])).requests.map((r: any) => r.request_id)).to.include(request.request_id);
    const link = request.upload_link.replace(PUBLIC_URL, t.server.url);
    const bytes = randomBytes(300_000);
    await writeFile(join(dir, 'scan.pdf'), bytes);
    // The outsider has no key: none in the environment either.
    const outsider = { ...env, DROPSTREAM_API_KEY: '' };
    const sent = await runToExit([bin, 'upload', join(dir, 'scan.pdf'), '--request', link, '--password', 'pw'], { cwd: dir, env: outsider, deadlineMs: 30_000 });
    expect(sent.code, sent.stderr).to.equal(0);
    expect(JSON.parse(sent.stdout)).to.deep.equal({ success: true, filename: 'scan.pdf', size: 300_000 });
    const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key });
    expect(got.body.files.map((f: any) => f.filename)).to.deep.equal(['scan.pdf']);
    expect(await json(['requests', 'close', request.request_id])).to.deep.equal({ request_id: request.request_id, closed: true });
    const refused = await runToExit([bin, 'upload', join(dir, 'scan.pdf'), '--request', link, '--password', 'pw'], { cwd: dir, env: outsider, deadlineMs: 30_000 });
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.include('request_not_found');
  });

  it('when requests create is given no limits, then the server\'s defaults apply (10 files, 7 days), and --max-files none --expires-in never lift them', async () => {
    const bounded = await json(['requests', 'create']);
    expect(bounded.max_files).to.equal(10);
    expect(bounded.expires_at).to.be.a('string');
    const open = await json(['requests', 'create', '--max-files', 'none', '--expires-in', 'never']);
    expect(open).to.include({ max_files: null, expires_at: null });
  });

  it('when upload --request --resumable sends a file, then it goes through tus at the link (no key) and prints the receipt', async () => {
    const owner = await t.account();
    const request = await json(['requests', 'create', '--max-files', '1', '--key', owner.apiKey]);
    const link = request.upload_link.replace(PUBLIC_URL, t.server.url);
    await writeFile(join(dir, 'big.bin'), randomBytes(400_000));
    const sent = await runToExit([bin, 'upload', join(dir, 'big.bin'), '--request', link, '--resumable'], { cwd: dir, env: { ...env, DROPSTREAM_API_KEY: '' }, deadlineMs: 30_000 });
    expect(sent.code, sent.stderr).to.equal(0);
    expect(JSON.parse(sent.stdout)).to.deep.equal({ success: true, filename: 'big.bin', size: 400_000 });
    // A tus upload leaves its row (until it expires), in the owner's account; a plain one leaves none.
    expect(await t.server.db.prisma.resumableUpload.count({ where: { accountId: owner.accountId } })).to.equal(1);
    const got = await call(t.url(`/api/v1/requests/${request.request_id}`), { key: owner.apiKey });
    expect(got.body.files.map((f: any) => [f.filename, f.size])).to.deep.equal([['big.bin', 400_000]]);
  });
});
