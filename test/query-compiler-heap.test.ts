// The Prisma client's query compiler arrives as a module exporting the
// WebAssembly as a 2.2 MB base64 string; imported, it stayed on the heap for
// the life of the process, twice (issue 24). scripts/generate.mjs rewrites
// the client to read the file instead. A child process (the compiled build)
// runs a query, so the compiler is loaded, and counts the base64 strings its
// heap still holds, beside one copy it keeps on purpose as a positive control.
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
// The positive control: one base64 copy of a module that this script keeps, so
// a snapshot whose format no longer shows such strings fails the count.
globalThis.control = Buffer.concat([Buffer.from('\\0asm\\x01\\0\\0\\0'), Buffer.alloc(3000)]).toString('base64');
// Strings that are a WebAssembly module in base64 ("\\0asm" is AGFzbQ), or the source of the module exporting one (a snapshot keeps only their first characters).
let snapshot = '';
for await (const chunk of getHeapSnapshot()) snapshot += chunk;
const held = (snapshot.match(/"(?:const wasm = \\\\")?AGFzbQ/g) ?? []).length;
await db.close();
process.stdout.write(JSON.stringify({ plans: plans.length, held, control: globalThis.control.slice(0, 6) }));
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
    const result = JSON.parse(out) as { plans: number; held: number; control: string };
    expect(result.plans, 'plans read through the compiler').to.be.greaterThan(0);
    expect(result.control, 'the control is a module in base64').to.equal('AGFzbQ');
    // The control's copy alone: it is found, and the compiler's is not.
    expect(result.held, 'base64 strings of a module on the heap').to.equal(1);
  });
});
