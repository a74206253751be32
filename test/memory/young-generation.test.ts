// holdYoungGeneration (src/memory/young-generation.ts): while held, objects that
// survive collections do not grow V8's young generation; once let go, they
// do again; an operator's own growth factor is left alone.
// growYoungGenerationWithLoad: it grows only while requests come fast.
// Each case runs in a new node process (tsx's loading may have grown it a
// step already).
import { expect } from 'chai';
import { runToExit } from '../helpers/run-to-exit.js';

const MiB = 1024 * 1024;

/** new_space's size after `mib` MiB of objects that stay alive, held or not, and again after letting go. */
const CHILD = `
import { getHeapSpaceStatistics } from 'node:v8';
import { holdYoungGeneration } from './src/memory/young-generation.ts';
const newSpace = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
const kept = [];
const survive = (mib) => { for (let i = 0; i < mib * 32; i++) kept.push(Array.from({ length: 1024 }, (_, j) => ({ j }))); };
const start = newSpace();
const release = process.env.HOLD ? holdYoungGeneration() : () => {};
survive(48);
const held = newSpace();
release();
survive(48);
console.log(JSON.stringify({ start, held, released: newSpace() }));
`;

async function sizes(hold: boolean, flags: string[] = []): Promise<{ start: number; held: number; released: number }> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...(hold ? { HOLD: '1' } : {}) };
  delete env.NODE_OPTIONS;
  const run = await runToExit(['--max-semi-space-size=32', ...flags, '--import', 'tsx', '--input-type=module', '-e', CHILD], { env, deadlineMs: 60_000 });
  expect(run.code, run.stderr).to.equal(0);
  return JSON.parse(run.stdout) as { start: number; held: number; released: number };
}

describe('holdYoungGeneration', () => {
  it('when held, then surviving objects leave the young generation at its starting size; let go, it grows again', async () => {
    const { start, held, released } = await sizes(true);
    expect(held).to.equal(start);
    expect(released).to.be.at.least(Math.max(4 * MiB, 2 * start));
  });

  it('when not held, then the same objects grow it (what the hold prevents)', async () => {
    const { start, held } = await sizes(false);
    expect(held).to.be.at.least(Math.max(4 * MiB, 2 * start));
  });

  it('when the operator set a growth factor, then the hold leaves it to them', async () => {
    const { start, held } = await sizes(true, ['--semi-space-growth-factor=4']);
    expect(held).to.be.at.least(Math.max(4 * MiB, 2 * start));
  });
});

/** new_space's size at start, after survivors with no requests, during many requests, and during health probes only. */
const LOAD_CHILD = `
import { createServer } from 'node:http';
import { getHeapSpaceStatistics } from 'node:v8';
import { growYoungGenerationWithLoad } from './src/memory/young-generation.ts';
const newSpace = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
const kept = [];
const survive = (mib) => { for (let i = 0; i < mib * 32; i++) kept.push(Array.from({ length: 1024 }, (_, j) => ({ j }))); };
const server = createServer((req, res) => res.end('ok'));
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = 'http://127.0.0.1:' + server.address().port;
// About 150 a second, one at a time: enough to count as load, little enough allocation to leave room to grow.
const requests = async (path, ms) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    await fetch(url + path).then((r) => r.text());
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};
const stop = growYoungGenerationWithLoad([server], { perSecond: 50, ignorePaths: ['/healthz'] });
const start = newSpace();
survive(48);
const quiet = newSpace();
await requests('/api/v1/files', 2200);
survive(8);
const busy = newSpace();
// The first check here may still count the last API requests (and the
// young generation grow once more with the client's survivors); the later ones see only probes.
await requests('/healthz', 2500);
const held = newSpace();
survive(48);
const probes = newSpace();
stop();
server.close();
console.log(JSON.stringify({ start, quiet, busy, held, probes }));
`;

describe('growYoungGenerationWithLoad', () => {
  it('when no requests come, then survivors leave the young generation as it is; under 50 requests a second it grows; with only health probes it is held again', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_OPTIONS;
    const run = await runToExit(['--max-semi-space-size=64', '--import', 'tsx', '--input-type=module', '-e', LOAD_CHILD], { env, deadlineMs: 60_000 });
    expect(run.code, run.stderr).to.equal(0);
    const { start, quiet, busy, held, probes } = JSON.parse(run.stdout) as { start: number; quiet: number; busy: number; held: number; probes: number };
    expect(quiet).to.equal(start);
    expect(busy).to.be.at.least(Math.max(4 * MiB, 2 * quiet));
    // Below its ceiling (two 64 MiB semi-spaces), so that 48 MiB of survivors would grow it if probes counted as load.
    expect(held).to.be.below(128 * MiB);
    // V8's factor would double it at least (probes counted as load: 32 -> 128 MiB); held, it once went 32 -> 45 MiB.
    expect(probes).to.be.below(2 * held);
  });
});
