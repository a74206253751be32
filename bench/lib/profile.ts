// Reads the .cpuprofile files `node --cpu-prof` wrote for our server and
// summarises where its CPU went: self time by function and by package
// (node_modules/<name>, node internals, our dist/, GC), as % of the time the
// process was not idle. Written to bench/data/profiles/summary.md.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Which package (or part of Node) a script URL belongs to. */
export function packageOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return url.replace(/^node:(internal\/)?/, 'node:').split('/')[0]!;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  const d = /\/(dist|src)\/(.*)$/.exec(url);
  if (d) return `dropstream ${d[2]}`;
  return url;
}

interface Tally {
  total: number;
  idle: number;
  byFunction: Map<string, number>;
  byPackage: Map<string, number>;
}

function tally(profile: CpuProfile, into: Tally): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    into.total += us;
    if (functionName === '(idle)') return void (into.idle += us);
    const fn = `${functionName || '(anonymous)'} ${url ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|src)\//, '$1/')}:${lineNumber + 1}` : ''}`.trim();
    into.byFunction.set(fn, (into.byFunction.get(fn) ?? 0) + us);
    const pkg = packageOf(url, functionName);
    into.byPackage.set(pkg, (into.byPackage.get(pkg) ?? 0) + us);
  });
}

function top(map: Map<string, number>, busy: number, n: number): string[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => `| ${((us / busy) * 100).toFixed(1)} | ${(us / 1e6).toFixed(2)} | \`${name.replace(/\|/g, '\\|')}\` |`);
}

async function profilesIn(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile() && e.name.endsWith('.cpuprofile')).map((e) => join(e.parentPath, e.name));
}

/** Summarises every profile under `dir` (one section per sub-folder, i.e. per scenario); returns the summary's path. */
export async function summarizeProfiles(dir: string): Promise<string> {
  const files = await profilesIn(dir);
  const groups = new Map<string, string[]>();
  for (const f of files) {
    const group = relative(dir, f).split('/')[0]!;
    groups.set(group, [...(groups.get(group) ?? []), f]);
  }
  const lines = ['# CPU profiles of the dropstream server', '', 'Self time; % of the time the process was not idle.', ''];
  for (const [group, paths] of groups) {
    const t: Tally = { total: 0, idle: 0, byFunction: new Map(), byPackage: new Map() };
    for (const p of paths) tally(JSON.parse(await readFile(p, 'utf8')) as CpuProfile, t);
    const busy = t.total - t.idle;
    lines.push(`## ${group}`, '', `${(t.total / 1e6).toFixed(1)} s profiled, busy ${(busy / 1e6).toFixed(1)} s (${((busy / t.total) * 100).toFixed(0)}%).`, '');
    lines.push('| % busy | s | package |', '|---|---|---|', ...top(t.byPackage, busy, 15), '');
    lines.push('| % busy | s | function |', '|---|---|---|', ...top(t.byFunction, busy, 30), '');
  }
  const out = join(dir, 'summary.md');
  await writeFile(out, `${lines.join('\n')}\n`);
  return out;
}

// `npx tsx bench/lib/profile.ts <dir>` summarises existing profiles.
if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await summarizeProfiles(process.argv[2] ?? 'bench/data/profiles'));
}
