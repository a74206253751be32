// The Prisma client's query compiler arrives as a module exporting the
// WebAssembly as a 2.2 MB base64 string; imported, it stayed on the heap for
// the life of the process, twice (issue 24). scripts/generate.mjs rewrites
// the client to read the file instead. A child process (the compiled build)
// runs a query, so the compiler is loaded, and counts the base64 strings its
// heap still holds.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { expect } from 'chai';

const root = resolve(import.meta.dirname, '..');

const script = `
import { getHeapSnapshot } from 'node:v8';
const { openDatabase } = await import('./dist/db/client.js');
const db = await openDatabase({});
await db.migrate();
const plans = await db.prisma.plan.findMany({ select: { name: true } });
// Strings that are a WebAssembly module in base64 ("\\0asm" is AGFzbQ), or the source of the module exporting one (a snapshot keeps only their first characters).
let snapshot = '';
for await (const chunk of getHeapSnapshot()) snapshot += chunk;
const held = (snapshot.match(/"(?:const wasm = \\\\")?AGFzbQ/g) ?? []).length;
await db.close();
process.stdout.write(JSON.stringify({ plans: plans.length, held }));
`;

describe("the Prisma query compiler's WebAssembly", () => {
  it('when the client has run a query, then no base64 copy of the module is left on the heap', async () => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const [code] = await once(child, 'exit');
    expect(code, err).to.equal(0);
    const result = JSON.parse(out) as { plans: number; held: number };
    expect(result.plans, 'plans read through the compiler').to.be.greaterThan(0);
    expect(result.held, 'base64 strings of the module on the heap').to.equal(0);
  });
});
