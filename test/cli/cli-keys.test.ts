// `dropstream keys create|list|revoke` and `dropstream audit` (issue 57), as an owner runs them (the
// compiled CLI, so `npm run build` first), against a real server.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { envWithoutConfig, repoRoot, runToExit } from '../helpers/run-to-exit.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

const bin = join(repoRoot, 'bin', 'dropstream.js');

describe('dropstream keys', function () {
  this.timeout(60_000);
  let t: TestServer;
  let dir: string;
  let env: Record<string, string>;

  async function json(args: string[]): Promise<any> {
    const result = await runToExit([bin, ...args], { cwd: dir, env, deadlineMs: 30_000 });
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  }

  before(async () => {
    t = await sharedServer('pglite');
    dir = await mkdtemp(join(tmpdir(), 'dropstream-keys-cli-'));
    env = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_')), DROPSTREAM_SERVER: t.server.url, DROPSTREAM_API_KEY: (await t.account()).apiKey };
  });
  after(async () => rm(dir, { recursive: true, force: true }));

  it('when an owner makes an upload-only key, lists and revokes it from the CLI, then the key holds only its scope while it lives and is refused once revoked', async () => {
    const made = await json(['keys', 'create', 'CI job', '--scopes', 'files:write', '--expires-in', '1d', '--allowed-cidrs', '127.0.0.0/8']);
    expect(made).to.deep.include({ name: 'CI job', scopes: ['files:write'], allowed_cidrs: ['127.0.0.0/8'] });
    expect(made.api_key).to.match(/^ds_live_/);
    expect((await call(t.url('/api/v1/files'), { key: made.api_key })).status).to.equal(403);
    const listed = await json(['keys', 'list']);
    expect(listed.map((k: any) => k.key_id)).to.include(made.key_id);
    expect(JSON.stringify(listed)).to.not.include(made.api_key);
    expect(await json(['keys', 'revoke', made.key_id])).to.deep.equal({ key_id: made.key_id, revoked: true });
    expect((await call(t.url('/api/v1/stats'), { key: made.api_key })).status).to.equal(401);
    const wider = await runToExit([bin, 'keys', 'create', 'wider', '--scopes', 'files:read', '--key', made.api_key], { cwd: dir, env, deadlineMs: 30_000 });
    expect(wider.code).to.equal(1);
    expect(wider.stderr).to.include('invalid_api_key');
  });

  it('when an owner asks for the audit trail of one action from the CLI, then it prints those rows with their key', async () => {
    const trail = await json(['audit', '--action', 'key.revoked', '--limit', '5']);
    expect(trail.pagination).to.include({ page: 1, limit: 5, total: 1 });
    expect(trail.events[0]).to.include({ action: 'key.revoked', actor: 'key', key_name: null, client_address: '127.0.0.0/24' });
  });
});
