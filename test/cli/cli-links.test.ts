// `dropstream files ...`, `dropstream links ...`, and the link rules upload
// and download take (--expires-in, --max-downloads, --password): the link
// features from the command line, as a user runs them (the compiled CLI,
// so `npm run build` first), against a real server.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { envWithoutConfig, repoRoot, runToExit } from '../helpers/run-to-exit.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const bin = join(repoRoot, 'bin', 'dropstream.js');

describe('dropstream files and links', () => {
  let t: TestServer;
  let key: string;
  let dir: string;
  let env: Record<string, string>;

  /** Runs the CLI with the server and key in the environment (DROPSTREAM_SERVER, DROPSTREAM_API_KEY). */
  async function cli(args: string[], extraEnv: Record<string, string> = {}) {
    const result = await runToExit([bin, ...args], { cwd: dir, env: { ...env, ...extraEnv }, deadlineMs: 30_000 });
    return { ...result, lines: result.stdout.split('\n').filter(Boolean) };
  }

  /** The JSON line of a command that succeeded quietly. */
  async function json(args: string[], extraEnv?: Record<string, string>): Promise<any> {
    const result = await cli(args, extraEnv);
    expect(result.stderr, `${args.join(' ')}: stderr`).to.equal('');
    expect(result.code, 'exit code').to.equal(0);
    expect(result.lines).to.have.length(1);
    return JSON.parse(result.lines[0]!);
  }

  /** The one error line of a command that failed (exit 1). */
  async function failure(args: string[], extraEnv?: Record<string, string>): Promise<string> {
    const result = await cli(args, extraEnv);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(1);
    expect(result.stdout).to.equal('');
    expect(result.stderr).to.match(/^dropstream: [^\n]+\n$/);
    return result.stderr.trim();
  }

  /** Uploads `bytes` as `name`; the one line upload prints: the public link, as the test server's address. */
  async function upload(name: string, bytes: Buffer, ...flags: string[]): Promise<string> {
    await writeFile(join(dir, name), bytes);
    const result = await cli(['upload', join(dir, name), ...flags]);
    expect(result.code, result.stderr).to.equal(0);
    return t.url(result.stdout.trim());
  }

  const fileIdOf = async (link: string) => {
    const { files } = await json(['files', 'list', '--limit', '100']);
    return files.find((file: { public_link: string }) => t.url(file.public_link) === link).file_id as number;
  };

  before(async () => {
    t = await startTestServer('pglite');
    key = (await t.account()).apiKey;
    dir = await mkdtemp(join(tmpdir(), 'dropstream-links-'));
    env = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_') || name === 'XDG_CACHE_HOME'), DROPSTREAM_SERVER: t.server.url, DROPSTREAM_API_KEY: key, XDG_CACHE_HOME: join(dir, '.cache') };
  });

  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('when upload is given --expires-in, --max-downloads and --password, then its public link has those rules, and download --password gets the file once', async () => {
    const bytes = randomBytes(200_000);
    const started = Date.now();
    const link = await upload('guarded.bin', bytes, '--expires-in', '2h', '--max-downloads', '1', '--password', 's3cret');
    const fileId = await fileIdOf(link);
    const info = await json(['files', 'info', String(fileId)]);
    const expiresAt = Date.parse(`${info.expires_at.replace(' ', 'T')}Z`);
    expect(expiresAt - started).to.be.within(7200_000 - 5_000, 7200_000 + 60_000);
    const [primary] = await json(['links', 'list', String(fileId)]);
    expect(primary).to.include({ primary: true, max_downloads: 1, password_protected: true, download_count: 0 });

    expect(await failure(['download', link, '-o', join(dir, 'none.bin')])).to.match(/^dropstream: 401 password_required: /);
    expect(await failure(['download', link, '-o', join(dir, 'none.bin'), '--password', 'wrong'])).to.match(/^dropstream: 401 wrong_password: /);
    const saved = await cli(['download', link, '-o', join(dir, 'got.bin'), '--password', 's3cret']);
    expect(saved.code, saved.stderr).to.equal(0);
    expect((await readFile(join(dir, 'got.bin'))).equals(bytes)).to.equal(true);
    // Its one download is used up.
    expect(await failure(['download', link, '-o', join(dir, 'again.bin'), '--password', 's3cret'])).to.match(/^dropstream: 410 link_exhausted: /);
  });

  it('when a resumable upload is given the rules, then they reach the server as its metadata', async () => {
    const link = await upload('tus.bin', randomBytes(100_000), '--resumable', '--max-downloads', '3', '--password', 'tus-pw');
    const [primary] = await json(['links', 'list', String(await fileIdOf(link))]);
    expect(primary).to.include({ primary: true, max_downloads: 3, password_protected: true });
  });

  it('when the cache folder cannot be used, then a resumable upload still succeeds, with one warning saying it cannot be resumed', async () => {
    // XDG_CACHE_HOME is a file: nothing can be read or made under it.
    const blocker = join(dir, 'not-a-folder');
    await writeFile(blocker, 'x');
    await writeFile(join(dir, 'nocache.bin'), randomBytes(10_000));
    const result = await cli(['upload', join(dir, 'nocache.bin'), '--resumable'], { XDG_CACHE_HOME: blocker });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.lines).to.have.length(1);
    expect(result.stderr).to.equal(`dropstream: warning: cannot use ${join(blocker, 'dropstream', 'uploads.json')} (ENOTDIR); this upload cannot be resumed by a later run\n`);
  });

  it('when links create, list and revoke are run, then a second link works with its own rules and stops working once revoked', async () => {
    const bytes = randomBytes(50_000);
    const fileId = await fileIdOf(await upload('shared.bin', bytes));
    const created = await json(['links', 'create', String(fileId), '--expires-in', '1h', '--max-downloads', '2', '--password', 'for-bob']);
    expect(created).to.include({ primary: false, max_downloads: 2, password_protected: true, download_count: 0 });
    expect(created.link_id).to.be.a('string');
    const listed = await json(['links', 'list', String(fileId)]);
    expect(listed.map((link: { link_id: string }) => link.link_id)).to.include(created.link_id);

    // The password from the environment: kept out of the process list.
    const got = await cli(['download', t.url(created.public_link), '-o', join(dir, 'bob.bin')], { DROPSTREAM_LINK_PASSWORD: 'for-bob' });
    expect(got.code, got.stderr).to.equal(0);
    expect((await readFile(join(dir, 'bob.bin'))).equals(bytes)).to.equal(true);

    const revoked = await json(['links', 'revoke', String(fileId), created.link_id]);
    expect(revoked).to.include({ file_id: fileId, link_id: created.link_id });
    expect((await json(['links', 'list', String(fileId)])).map((link: { link_id: string }) => link.link_id)).not.to.include(created.link_id);
    expect(await failure(['download', t.url(created.public_link), '-o', join(dir, 'late.bin'), '--password', 'for-bob'])).to.match(/^dropstream: 404 /);
  });

  it('when files list, info and delete are run, then they show the file and delete it', async () => {
    const link = await upload('gone.txt', Buffer.from('soon gone'));
    const fileId = await fileIdOf(link);
    const list = await json(['files', 'list']);
    expect(Object.keys(list)).to.deep.equal(['files', 'pagination']);
    expect(await json(['files', 'info', String(fileId)])).to.include({ file_id: fileId, filename: 'gone.txt', size: 9, download_count: 0 });
    expect(await json(['files', 'delete', String(fileId)])).to.deep.equal({ file_id: fileId, deleted: true });
    expect(await failure(['files', 'info', String(fileId)])).to.match(/^dropstream: 404 file_not_found: /);
  });

  it('when a rule or an id is not valid, then the CLI says which, before sending anything', async () => {
    // DROPSTREAM_SERVER points nowhere: had it sent, the line would say the connection failed.
    const nowhere = { DROPSTREAM_SERVER: 'http://127.0.0.1:1' };
    expect(await failure(['links', 'create', '12', '--max-downloads', '0'], nowhere)).to.equal('dropstream: --max-downloads must be at least 1');
    expect(await failure(['links', 'create', '12', '--expires-in', '5x'], nowhere)).to.equal('dropstream: --expires-in must be a time such as 3600, 90m, 12h or 7d, not "5x"');
    expect(await failure(['files', 'info', 'abc'], nowhere)).to.equal('dropstream: <file-id> must be a file\'s number (file_id), not "abc"');
    expect(await failure(['upload', join(dir, 'x'), '--expires-in', '-5'], nowhere)).to.include('--expires-in must be a time');
    const typo = await cli(['links', 'create', '12', '--max-download', '2'], nowhere);
    expect(typo.code).to.equal(2);
    expect(typo.stderr.split('\n')[0]).to.equal('dropstream: unknown option --max-download for `links create`; did you mean --max-downloads?');
  });

  it('when the server refuses a rule, then its code is the line', async () => {
    const fileId = await fileIdOf(await upload('rules.bin', randomBytes(10)));
    expect(await failure(['links', 'create', String(fileId), '--password', 'x'.repeat(300)])).to.match(/^dropstream: 400 invalid_password: /);
  });
});
