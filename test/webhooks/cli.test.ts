// `dropstream webhooks add|list|remove|rotate-secret|deliveries` (issue 57:
// the one API feature that had no CLI), as an owner runs them (the compiled
// CLI, so `npm run build` first), against a real server.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { envWithoutConfig, repoRoot, runToExit } from '../helpers/run-to-exit.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

const bin = join(repoRoot, 'bin', 'dropstream.js');

describe('dropstream webhooks', function () {
  this.timeout(60_000);
  let dir: string;
  let env: Record<string, string>;

  async function json(args: string[]): Promise<any> {
    const result = await runToExit([bin, ...args], { cwd: dir, env, deadlineMs: 30_000 });
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  }

  before(async () => {
    const t: TestServer = await sharedServer('pglite');
    dir = await mkdtemp(join(tmpdir(), 'dropstream-webhooks-cli-'));
    env = { ...envWithoutConfig((name) => name.startsWith('DROPSTREAM_')), DROPSTREAM_SERVER: t.server.url, DROPSTREAM_API_KEY: (await t.account()).apiKey };
  });
  after(async () => rm(dir, { recursive: true, force: true }));

  it('when an owner adds a webhook, lists it, rotates its secret, reads its deliveries and removes it from the CLI, then each step prints its JSON line', async () => {
    const added = await json(['webhooks', 'add', 'https://example.com/hooks', '--events', 'file.uploaded,file.deleted']);
    expect(added).to.include({ url: 'https://example.com/hooks' });
    expect(added.events).to.deep.equal(['file.uploaded', 'file.deleted']);
    expect(added.secret).to.match(/^whsec_/);
    expect((await json(['webhooks', 'list'])).map((w: any) => w.webhook_id)).to.deep.equal([added.webhook_id]);
    const rotated = await json(['webhooks', 'rotate-secret', added.webhook_id]);
    expect(rotated.secret).to.match(/^whsec_/).and.not.equal(added.secret);
    expect(await json(['webhooks', 'deliveries', added.webhook_id])).to.deep.equal([]);
    expect(await json(['webhooks', 'remove', added.webhook_id])).to.deep.equal({ webhook_id: added.webhook_id, removed: true });
  });
});
