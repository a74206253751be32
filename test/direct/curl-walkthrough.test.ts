// docs/direct-uploads.md's "With curl alone" walkthrough, run as written
// (bash, curl, jq, tail, head) against a server with S3_DIRECT_UPLOADS on
// s3rver: what an operator copies must upload the file. Where jq is not
// installed (a newcomer's machine), the test is named under "Did not run";
// CI installs it (.ci/clients.sh) and refuses to leave it out.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { notRun } from '../helpers/not-run.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { MiB, sha } from './direct-client.js';

const run = promisify(execFile);
const hasJq = (() => {
  try {
    execFileSync('jq', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** The walkthrough's shell block, the placeholder line of KEY and API taken from the environment instead. */
async function walkthrough(): Promise<string> {
  const doc = await readFile(new URL('../../docs/direct-uploads.md', import.meta.url), 'utf8');
  const block = /## With curl alone\n\n```sh\n([\s\S]*?)```/.exec(doc)?.[1] ?? expect.fail('no "With curl alone" sh block in docs/direct-uploads.md');
  const [first, ...rest] = block.split('\n');
  expect(first).to.match(/^KEY=\.\.\.; API=/);
  return ['set -euo pipefail', ...rest].join('\n');
}

describe('uploads straight to the store: the docs\' curl walkthrough', function () {
  this.timeout(60_000);
  if (!hasJq) {
    if (process.env.CI) throw new Error('CI must have jq for the curl walkthrough of docs/direct-uploads.md (see .ci/clients.sh)');
    notRun('jq is missing: docs/direct-uploads.md\'s curl walkthrough', 'apt-get install jq, then npm test');
    return;
  }
  let s3: TestS3;
  let t: TestServer;
  let dir: string;
  before(async () => {
    s3 = await startTestS3();
    t = await startTestServer('pglite', { ...s3.env(s3.bucket('direct-curl')), S3_DIRECT_UPLOADS: 'true' });
    dir = await mkdtemp(join(tmpdir(), 'dropstream-walkthrough-'));
  });
  after(async () => {
    await t?.close();
    await s3?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('when the walkthrough runs as written on a file of three parts, then the file is stored with its bytes', async () => {
    const { apiKey } = await t.account();
    const data = randomBytes(40 * MiB + 7);
    await writeFile(join(dir, 'video.mkv'), data);
    const { stdout } = await run('bash', ['-c', await walkthrough()], { cwd: dir, env: { ...process.env, KEY: apiKey, API: t.url('/api/v1') } });
    const done = JSON.parse(stdout) as { success: boolean; file_id: number; size: number; public_link: string };
    expect(done).to.include({ success: true, size: data.length });
    expect(sha(Buffer.from(await (await fetch(t.url(done.public_link))).arrayBuffer()))).to.equal(sha(data));
  });
});
