// The first start mistakes a newcomer makes, each said in one line before
// anything is migrated: a port in use, a DATA_DIR that cannot be made, an
// S3_ENDPOINT without a scheme, a Node older than package.json's engines.
// Driven as `dropstream serve` in a child process (the compiled CLI: `npm run build` first).
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { nodeVersionWarning } from '../../src/cli/preflight.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { makeDir } from '../../src/make-dir.js';
import { dataDirError } from '../../src/startup-error.js';
import { envWithoutConfig, runToExit } from '../helpers/run-to-exit.js';

const baseEnv = envWithoutConfig();

/** Runs the CLI to its exit (killed at the deadline, which then fails the test); its exit code, stdout and stderr. */
async function run(args: string[], env: Record<string, string>, node = process.execPath, deadlineMs = 20_000) {
  const { code, signal, stdout, stderr } = await runToExit(['bin/dropstream.js', ...args], {
    env: { ...baseEnv, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', ...env },
    node,
    deadlineMs,
  });
  expect(signal, `killed at the ${deadlineMs} ms deadline; stderr: ${stderr}`).to.equal(null);
  return { code: code as number, stdout, stderr };
}

function oneLine(stderr: string): string {
  expect(stderr, 'stderr').to.match(/^dropstream: [^\n]+\n$/);
  return stderr.trim();
}

describe('start mistakes: one line, before migrations', () => {
  let dataDir: string;
  let taken: Server;
  let takenPort: number;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-mistakes-'));
    taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    takenPort = (taken.address() as { port: number }).port;
  });
  afterEach(async () => {
    taken.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  for (const variable of ['PORT', 'ADMIN_PORT']) {
    it(`when ${variable} is in use, then exits 1 with one line naming ${variable} and the address, and nothing was migrated`, async () => {
      const result = await run(['serve'], { DATA_DIR: dataDir, [variable]: String(takenPort), ADMIN_TOKEN: 'mistakes-admin-token-0123456789abcdef' });
      expect(result.code).to.equal(1);
      expect(oneLine(result.stderr)).to.equal(
        `dropstream: ${variable}: 127.0.0.1:${takenPort} is already in use by another process; stop it or set ${variable} to a free port`,
      );
      expect(result.stdout).to.not.include('applied migrations');
      expect(existsSync(join(dataDir, 'pglite')), 'the embedded database was not even made').to.equal(false);
    });
  }

  it('when DATA_DIR cannot be made (under /proc), then exits 1 at once with one line, never a hang', async function () {
    this.timeout(30_000);
    const started = Date.now();
    const result = await run(['serve'], { DATA_DIR: '/proc/dropstream-test' }, process.execPath, 20_000);
    expect(result.code).to.equal(1);
    expect(oneLine(result.stderr)).to.match(/^dropstream: DATA_DIR \/proc\/dropstream-test cannot be made \(ENOENT on mkdir '\/proc\/dropstream-test'\): .*set DATA_DIR to a writable folder$/);
    expect(Date.now() - started).to.be.below(15_000);
  });

  it('when DATA_DIR is a file, then exits 1 with one line saying so and what to set instead', async () => {
    const file = join(dataDir, 'notes.txt');
    await writeFile(file, 'not a folder');
    const result = await run(['serve'], { DATA_DIR: file });
    expect(result.code).to.equal(1);
    expect(oneLine(result.stderr)).to.match(
      new RegExp(`^dropstream: DATA_DIR ${file} is a file, not a directory \\(ENOTDIR on mkdir '${file}'\\): set DATA_DIR to a directory \\(it is made if missing\\), or move the file away$`),
    );
  });

  it('when DATA_DIR is denied, then the advice is about volumes in a container and about the folder elsewhere', () => {
    const { uid, gid, username } = userInfo();
    const denied = Object.assign(new Error('EACCES'), { code: 'EACCES', syscall: 'mkdir', path: '/srv/ds/pglite' });
    expect(dataDirError(denied, '/srv/ds', true)?.message).to.equal(
      `DATA_DIR /srv/ds is not writable by this process, uid ${uid} gid ${gid} (EACCES on mkdir '/srv/ds/pglite'): chown -R ${uid}:${gid} the directory (on the host, for a bind mount), or mount a named volume there`,
    );
    expect(dataDirError(denied, '/srv/ds', false)?.message).to.equal(
      `DATA_DIR /srv/ds is not writable by this process, uid ${uid} gid ${gid} (EACCES on mkdir '/srv/ds/pglite'): ` +
        `give it to this user (sudo chown -R ${uid}:${gid} /srv/ds), or set DATA_DIR to a folder ${username} may write, e.g. DATA_DIR=$HOME/dropstream-data`,
    );
  });

  it('when a folder cannot be made under a parent that exists, then makeDir rejects with ENOENT (Node\'s recursive mkdir never settles there)', async () => {
    const err = await makeDir('/proc/dropstream-test/a/b').then(() => undefined, (e: NodeJS.ErrnoException) => e);
    expect(err?.code).to.equal('ENOENT');
    expect(err?.path).to.equal('/proc/dropstream-test');
  });

  it('when makeDir makes nested folders, then they exist, and again is a no-op', async () => {
    const nested = join(dataDir, 'a', 'b', 'c');
    await makeDir(nested);
    await makeDir(nested);
    expect(existsSync(nested)).to.equal(true);
  });

  it('when S3_ENDPOINT has no scheme, then the message says so and shows a right one', () => {
    expect(() => loadConfig({ S3_ENDPOINT: '127.0.0.1:4568', S3_BUCKET: 'files' })).to.throw(
      ConfigError,
      'S3_ENDPOINT: "127.0.0.1:4568" has no scheme: write it as a URL, e.g. http://127.0.0.1:4568 (or https://127.0.0.1:4568 for TLS)',
    );
    expect(() => loadConfig({ S3_ENDPOINT: 'minio:9000', S3_BUCKET: 'files' })).to.throw(ConfigError, '"minio:9000" has no scheme');
    expect(() => loadConfig({ S3_ENDPOINT: 'ftp://minio:9000', S3_BUCKET: 'files' })).to.throw(ConfigError, 'must be an http:// or https:// URL');
  });

  it('when DATABASE_URL is not a URL, then `serve` exits 1 with one line naming it, no stack trace', async () => {
    const result = await run(['serve'], { DATA_DIR: dataDir, DATABASE_URL: 'postgresql://dropstream:pw@db:99999/dropstream' });
    expect(result.code).to.equal(1);
    expect(oneLine(result.stderr)).to.equal(
      'dropstream: invalid configuration: DATABASE_URL: is not a valid postgresql:// or postgres:// URL ' +
        '(a space, a port over 65535, an unencoded special character?), e.g. postgresql://user:password@host:5432/dropstream',
    );
  });

  it('when S3_PRESIGNED_DOWNLOADS is set on the local store, then `serve` exits 1 with one line saying it needs S3', async () => {
    const result = await run(['serve'], { DATA_DIR: dataDir, S3_PRESIGNED_DOWNLOADS: 'true' });
    expect(result.code).to.equal(1);
    expect(oneLine(result.stderr)).to.equal(
      'dropstream: invalid configuration: S3_PRESIGNED_DOWNLOADS: is true but the store is local: presigned downloads need the S3 store (set S3_BUCKET), or unset it',
    );
  });

  it('when Node is older than engines, then a warning names the version and the range; a supported one gets none', () => {
    expect(nodeVersionWarning('v20.19.5')).to.equal('Node v20.19.5 is not supported (package.json engines: node >=22); use Node 24 LTS');
    expect(nodeVersionWarning('v22.0.0')).to.equal(undefined);
    expect(nodeVersionWarning('v24.11.1')).to.equal(undefined);
  });

  it('when the CLI runs on a Node older than engines, then it prints one warning line and goes on', async () => {
    // A `node` of our own that says it is v20.19.5: the real one, with
    // process.version replaced before the CLI's first line runs. The test
    // needs no old Node on the machine, so it runs (and can fail) anywhere.
    const dir = await mkdtemp(join(tmpdir(), 'dropstream-old-node-'));
    try {
      const says = join(dir, 'old-version.mjs');
      await writeFile(says, "Object.defineProperty(process, 'version', { value: 'v20.19.5' });\n");
      const node = join(dir, 'node');
      await writeFile(node, `#!/bin/sh\nexec '${process.execPath}' --import '${says}' "$@"\n`, { mode: 0o755 });
      const result = await run(['help'], {}, node);
      expect(result.code).to.equal(0);
      expect(result.stdout).to.include('serve');
      expect(result.stderr).to.equal('dropstream: warning: Node v20.19.5 is not supported (package.json engines: node >=22); use Node 24 LTS\n');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
