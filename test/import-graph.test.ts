// The import graph of src/, between its top-level modules and folders: no
// cycle, and no import running up the layers (HOUSE-STYLE: cli -> start ->
// server -> app -> http -> the components -> storage and db). A module or
// folder not named in LAYERS is held to the cycle check alone; name it there
// to place it.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect } from 'chai';

const SRC = resolve(import.meta.dirname, '..', 'src');

/** Highest first; an entry may import only entries of later layers (or unplaced ones). */
const LAYERS: string[][] = [
  ['cli'],
  ['start'],
  ['server'],
  ['app'],
  ['http'],
  ['files'],
  ['limits'],
  ['accounts', 'webhooks'],
  ['storage', 'db'],
  // The process's memory tuning: started by the command, built on Node alone.
  ['memory'],
];

/** Top-level entry -> the entries its files import (relative imports, static or dynamic; the generated Prisma client left out). */
function graph(): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>();
  const top = (path: string) => relative(SRC, path).split('/')[0]!.replace(/\.[jt]s$/, '');
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .filter((p) => p.endsWith('.ts') && !p.startsWith('generated/'))
    .map((p) => join(SRC, p));
  for (const file of files) {
    const from = top(file);
    if (!edges.has(from)) edges.set(from, new Set());
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'|(?:^|\n)\s*import\s+'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g)) {
      const target = resolve(dirname(file), (m[1] ?? m[2] ?? m[3])!);
      if (!target.startsWith(SRC + '/') || target.includes('/generated/')) continue;
      const to = top(target);
      if (to !== from) edges.get(from)!.add(to);
    }
  }
  return edges;
}

describe('import graph of src/', () => {
  const edges = graph();

  it('when the top-level modules and folders import each other, then no import leads back to where it started (no cycle)', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (node: string, path: string[]) => {
      state.set(node, 'open');
      for (const next of edges.get(node) ?? []) {
        if (state.get(next) === 'open') cycles.push([...path, node, next].join(' -> '));
        else if (!state.has(next)) visit(next, [...path, node]);
      }
      state.set(node, 'done');
    };
    for (const node of edges.keys()) if (!state.has(node)) visit(node, []);
    expect(cycles).to.deep.equal([]);
  });

  it('when a placed module or folder imports another placed one, then the other is on a lower layer (no upward import)', () => {
    const layerOf = new Map(LAYERS.flatMap((names, i) => names.map((name) => [name, i] as const)));
    const upward: string[] = [];
    for (const [from, targets] of edges) {
      for (const to of targets) {
        const [a, b] = [layerOf.get(from), layerOf.get(to)];
        if (a !== undefined && b !== undefined && b <= a) upward.push(`${from} -> ${to}`);
      }
    }
    expect(upward).to.deep.equal([]);
    // Every placed name still exists: a renamed folder must be renamed here too.
    expect([...layerOf.keys()].filter((name) => !edges.has(name))).to.deep.equal([]);
  });

  it('when the memory tuning is imported, then only the command that starts the process imports it', () => {
    const importers = [...edges].filter(([, targets]) => targets.has('memory')).map(([from]) => from);
    expect(importers).to.deep.equal(['cli']);
    expect([...edges.get('memory')!]).to.deep.equal([]);
  });
});
