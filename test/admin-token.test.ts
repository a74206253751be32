// The generated admin token, as replicas sharing one DATA_DIR volume meet it
// (docker compose up --scale app=3 starts them together).
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { writeFile } from 'node:fs/promises';
import { adminTokenPath, resolveAdminToken } from '../src/admin-token.js';
import { StartupError } from '../src/startup-error.js';

describe('admin token', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-token-'));
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  it('when several instances start at once on one DATA_DIR, then all get the one token written there', async () => {
    for (let round = 0; round < 20; round++) {
      await rm(adminTokenPath(dataDir), { force: true });
      const tokens = await Promise.all(Array.from({ length: 8 }, () => resolveAdminToken(undefined, dataDir)));
      const written = (await readFile(adminTokenPath(dataDir), 'utf8')).trim();
      // 256 bits in hex: never a leading '-' that a command line would take for an option.
      expect(written).to.match(/^[0-9a-f]{64}$/);
      expect(new Set(tokens)).to.deep.equal(new Set([written]));
    }
  });

  it('when the token is generated, then only its owner can read it and nothing else is left in DATA_DIR', async () => {
    const token = await resolveAdminToken(undefined, dataDir);
    expect((await stat(adminTokenPath(dataDir))).mode & 0o777).to.equal(0o600);
    expect(await resolveAdminToken(undefined, dataDir)).to.equal(token);
    const { readdir } = await import('node:fs/promises');
    expect(await readdir(dataDir)).to.deep.equal(['admin-token']);
  });

  it('when ADMIN_TOKEN is set, then it wins and nothing is written', async () => {
    expect(await resolveAdminToken('configured-token-0123456789', dataDir)).to.equal('configured-token-0123456789');
    const { readdir } = await import('node:fs/promises');
    expect(await readdir(dataDir)).to.deep.equal([]);
  });

  it('when the token file holds a token under 32 characters, then start stops with one line naming the file and the fix (issue 38)', async () => {
    await writeFile(adminTokenPath(dataDir), 'short-hand-written-token\n', { mode: 0o600 });
    const err = await resolveAdminToken(undefined, dataDir).then(() => undefined, (e: unknown) => e);
    expect(err).to.be.instanceOf(StartupError);
    expect((err as Error).message).to.equal(`${adminTokenPath(dataDir)} holds an admin token of 24 characters; it must have at least 32: remove the file (a new token is generated) or write a longer one`);
    await writeFile(adminTokenPath(dataDir), `${'k'.repeat(32)}\n`);
    expect(await resolveAdminToken(undefined, dataDir)).to.equal('k'.repeat(32));
  });
});
