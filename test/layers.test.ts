// The import graph of src/: modules (a folder under src/, or a file at its
// root) on layers, top to bottom. An import may run down or stay on its own
// layer, never up, and the modules never import each other in a circle
// (issue 40: "no import cycle and no import running upward"). A new folder or
// root file fails here until it is given a layer.
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { expect } from 'chai';

/** Top first. */
const LAYERS: string[][] = [
  ['cli'],
  ['server'],
  ['app', 'connection-cap', 'idle-collect', 'young-generation', 'admin-token'],
  ['listener'],
  ['http'],
  // The features: plain uploads, resumable uploads (tus), the file component.
  ['uploads', 'tus', 'files', 'links'],
  ['limits', 'webhooks'],
  ['accounts'],
  // The upload ledger: pending_objects, daily_uploads, reserved_bytes.
  ['ledger'],
  ['storage', 'db'],
  ['config'],
  [
    'errors',
    'error-codes',
    'client-key',
    'metrics',
    'log-throttle',
    'log-format',
    'open-files',
    'closers',
    'data-dir',
    'make-dir',
    'startup-error',
    'utc-day',
    'request-count',
    'malloc-trim',
  ],
];

const SRC = new URL('../src/', import.meta.url).pathname;

/** The module of a path under src/: its first folder, or the file's name without .ts. */
function moduleOf(path: string): string {
  const [first, ...rest] = relative(SRC, path).split(sep);
  return rest.length > 0 ? first! : first!.replace(/\.ts$/, '');
}

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) => (e.isDirectory() ? (e.name === 'generated' ? [] : sources(join(dir, e.name))) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [])),
  );
  return nested.flat();
}

/** Module-level imports: [from, to, file] for each relative import that leaves its module. */
async function imports(): Promise<Array<[string, string, string]>> {
  const found: Array<[string, string, string]> = [];
  for (const file of await sources(SRC)) {
    const text = await readFile(file, 'utf8');
    for (const match of text.matchAll(/(?:from|import\()\s*['"](\.[^'"]+)['"]/g)) {
      const target = normalize(join(dirname(file), match[1]!));
      if (relative(SRC, target).startsWith('generated')) continue;
      const from = moduleOf(file);
      const to = moduleOf(target.replace(/\.js$/, '.ts'));
      if (from !== to) found.push([from, to, relative(SRC, file)]);
    }
  }
  return found;
}

const layerOf = new Map(LAYERS.flatMap((names, layer) => names.map((name) => [name, layer] as const)));

describe('layers of src/', () => {
  it('when a module imports another, then both have a layer and the import runs down or sideways, never up', async () => {
    const all = await imports();
    expect(all.length, 'imports found').to.be.above(50);
    const unplaced = [...new Set(all.flatMap(([from, to]) => [from, to]))].filter((m) => !layerOf.has(m));
    expect(unplaced, 'modules without a layer (add them to LAYERS)').to.deep.equal([]);
    const upward = all.filter(([from, to]) => layerOf.get(from)! > layerOf.get(to)!).map(([from, to, file]) => `${file}: ${from} -> ${to}`);
    expect(upward, 'imports running upward').to.deep.equal([]);
  });

  it('when the modules import each other, then no chain of imports comes back to where it began', async () => {
    const next = new Map<string, Set<string>>();
    for (const [from, to] of await imports()) next.set(from, (next.get(from) ?? new Set()).add(to));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (m: string, path: string[]) => {
      if (state.get(m) === 'done') return;
      if (state.get(m) === 'open') return void cycles.push([...path.slice(path.indexOf(m)), m].join(' -> '));
      state.set(m, 'open');
      for (const to of next.get(m) ?? []) visit(to, [...path, m]);
      state.set(m, 'done');
    };
    for (const m of next.keys()) visit(m, []);
    expect(cycles).to.deep.equal([]);
  });
});
