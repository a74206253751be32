// The import graph of src/: no cycle between files or between modules (a
// folder of src/, or a file at its root), and no import running upward
// through the layers below. docs/architecture.md draws the same layers; a new
// module must be given its place here, or this test names it.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect } from 'chai';

/** Top first: a module may import its own layer's modules and those below, never those above. */
const LAYERS: Record<string, string[]> = {
  'the command line': ['cli'],
  'listening (a built server on its ports)': ['start', 'connection-cap', 'listener'],
  'the composition root': ['server'],
  'the Koa apps: the public app, the versioned API it mounts, the admin app': ['app', 'api', 'admin'],
  'pages, probes and the description of the API: the home page, the docs, the web app, health, the OpenAPI document built from the features\' schemas': ['pages', 'health', 'openapi'],
  'transports: tus, plain uploads, uploads straight to the store, each with its routes': ['tus', 'uploads', 'direct'],
  'the intake: where every upload opens and becomes a file': ['intake'],
  'features, each with its routes: file requests, files, downloads, links, keys, webhooks, the audit trail': ['requests', 'files', 'downloads', 'links', 'keys', 'webhooks', 'trail'],
  'HTTP: what every route shares (auth, client address, errors, bodies, the request log)': ['http'],
  'what features stand on: accounts and plans, limits': ['accounts', 'limits'],
  'the ledgers: the upload ledger (pending_objects, daily_uploads, reserved_bytes), the audit trail': ['ledger', 'audit'],
  'services: stores, the database, notices between instances, metrics, closers, memory tuning': ['storage', 'db', 'notices', 'metrics', 'closers', 'memory'],
  'foundations': ['config', 'admin-token', 'data-dir', 'errors', 'error-codes', 'wire-date', 'client-key', 'utc-day', 'clock', 'wire-schemas', 'file-wire', 'make-dir', 'startup-error', 'log-format', 'log-throttle', 'open-files', 'version'],
};

/** Process-wide tuning (V8 flags, libc): started by the command that runs the server, nothing else. */
const ONLY_CLI = ['memory'];

const SRC = resolve('src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'generated' ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

// Static and dynamic imports and re-exports of our own files, `import type`
// included: erased at build time, a type import still ties two files
// together for whoever reads or changes them (issue 52).
const IMPORT = /(?:^(?:import|export)\s+(?:[^'";]*?\sfrom\s+)?|\bimport\(\s*)['"](\.{1,2}\/[^'"]+)['"]/gm;

/** file -> the files of src/ it imports (Prisma's generated client left out). */
function importGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const targets = new Set<string>();
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const target = resolve(dirname(file), match[1]!).replace(/\.js$/, '.ts');
      if (target.startsWith(`${SRC}/`) && !target.includes('/generated/')) targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** The module a file belongs to: its folder under src/, or its own name at the root. */
const moduleOf = (file: string) => {
  const [first, ...rest] = relative(SRC, file).split('/');
  return rest.length ? first! : first!.replace(/\.ts$/, '');
};

/** Strongly connected components of more than one node (Tarjan), or a node importing itself. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.has(node)) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe('the import graph of src/', () => {
  const files = importGraph();
  const modules = new Map<string, Set<string>>();
  for (const [file, targets] of files) {
    const from = moduleOf(file);
    const set = modules.get(from) ?? new Set<string>();
    modules.set(from, set);
    for (const target of targets) if (moduleOf(target) !== from) set.add(moduleOf(target));
  }
  const layerOf = new Map(Object.values(LAYERS).flatMap((members, rank) => members.map((name) => [name, rank] as const)));

  it('when the files are read, then the graph is really there (a positive control: the CLI reaches the server and the app the HTTP layer)', () => {
    expect(files.size).to.be.above(50);
    expect(modules.get('cli')).to.include('server');
    expect(modules.get('app')).to.include('http');
  });

  it('when imports are followed from file to file, then none comes back to where it started', () => {
    expect(cycles(files).map((c) => c.map((f) => relative(SRC, f)))).to.deep.equal([]);
  });

  it('when imports are followed from module to module, then none comes back to where it started', () => {
    expect(cycles(modules)).to.deep.equal([]);
  });

  it('when every module is placed in its layer, then none is left unplaced and none imports a layer above its own', () => {
    expect([...modules.keys()].filter((name) => !layerOf.has(name)).sort(), 'modules with no layer in LAYERS').to.deep.equal([]);
    const upward = [...modules].flatMap(([from, targets]) => [...targets].filter((to) => layerOf.get(to)! < layerOf.get(from)!).map((to) => `${from} -> ${to}`));
    expect(upward).to.deep.equal([]);
    expect([...layerOf.keys()].filter((name) => !modules.has(name)).sort(), 'names in LAYERS with no module (renamed or gone)').to.deep.equal([]);
  });

  it('when the upload ledger\'s statements are imported, then only the ledger, the intake and the two named readers and writer import them', () => {
    // The SQL on pending_objects, daily_uploads and reserved_bytes is the
    // ledger's; the intake runs the statements that open and finish an
    // upload. Outside them: a file's deletion queues its object in the
    // statement removing its row, tus's listing reads which uploads are
    // unfinished, and the orphan walk reads which objects a record names.
    const statements = join(SRC, 'ledger', 'statements.ts');
    const importers = [...files].filter(([file, targets]) => targets.has(statements) && !['ledger', 'intake'].includes(moduleOf(file))).map(([file]) => relative(SRC, file));
    expect(importers.sort()).to.deep.equal(['files/file-rows.ts', 'files/orphans.ts', 'tus/records.ts']);
  });

  it('when process-wide tuning is imported, then only the command line imports it', () => {
    const importers = [...modules].filter(([from, targets]) => from !== 'cli' && ONLY_CLI.some((name) => targets.has(name))).map(([from]) => from);
    expect(importers).to.deep.equal([]);
  });
});
