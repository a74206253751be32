// `dropstream loadtest compare A.json B.json [--report DIFF.html]`: the
// per-kind differences of two runs' JSON summaries, printed as a table and,
// with --report, drawn (latency and throughput bars side by side per kind,
// in a self-contained page like the run's report).
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { CliError } from '../cli-error.js';
import type { Output } from './output.js';

interface KindNumbers {
  requests: number;
  errors: number;
  throttled: number;
  p50: number;
  p99: number;
  mbPerSecond: number;
}

interface Run {
  file: string;
  scenario: string;
  verdict: { ok: boolean; headline: string };
  kinds: Record<string, KindNumbers>;
  total: KindNumbers;
}

/** The columns compared, with how a change reads: for latency lower is better, for MB/s higher. */
export const COMPARED: { key: keyof KindNumbers; label: string; digits: number }[] = [
  { key: 'requests', label: 'requests', digits: 0 },
  { key: 'errors', label: 'errors', digits: 0 },
  { key: 'throttled', label: 'throttled', digits: 0 },
  { key: 'p50', label: 'p50 ms', digits: 1 },
  { key: 'p99', label: 'p99 ms', digits: 1 },
  { key: 'mbPerSecond', label: 'MB/s', digits: 2 },
];

async function readRun(file: string): Promise<Run> {
  let json: any;
  try {
    json = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new CliError(`cannot read ${file} as a loadtest JSON summary (--json FILE): ${(err as Error).message}`);
  }
  if (typeof json?.kinds !== 'object' || typeof json?.requests !== 'number') throw new CliError(`${file} is not a loadtest JSON summary (no kinds or requests)`);
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  const kinds: Record<string, KindNumbers> = {};
  for (const [name, k] of Object.entries(json.kinds as Record<string, any>)) {
    kinds[name] = { requests: num(k.requests), errors: num(k.errors), throttled: num(k.throttled), p50: num(k.p50), p99: num(k.p99), mbPerSecond: num(k.mbPerSecond) };
  }
  return {
    file,
    scenario: String(json.parameters?.scenario ?? '?'),
    // Summaries written before the verdict existed have none: say so rather than guess.
    verdict: json.verdict ?? { ok: json.thresholds?.broken?.length === 0, headline: '(no verdict in this summary)' },
    kinds,
    total: { requests: num(json.requests), errors: num(json.errors), throttled: num(json.throttled), p50: num(json.p50Ms), p99: num(json.p99Ms), mbPerSecond: num(json.mbPerSecond) },
  };
}

/** B relative to A, as a signed percentage; empty when A is 0 (no base to compare with). */
export function change(a: number, b: number): string {
  if (a === 0) return b === 0 ? '0%' : 'new';
  const pct = ((b - a) / a) * 100;
  return `${pct >= 0 ? '+' : ''}${pct.toFixed(0)}%`;
}

export function compareRuns(a: Run, b: Run) {
  const names = [...new Set([...Object.keys(a.kinds), ...Object.keys(b.kinds)])].sort();
  const empty: KindNumbers = { requests: 0, errors: 0, throttled: 0, p50: 0, p99: 0, mbPerSecond: 0 };
  const rows = [...names.map((name) => ({ name, a: a.kinds[name] ?? empty, b: b.kinds[name] ?? empty })), { name: 'total', a: a.total, b: b.total }];
  return { a, b, rows };
}

export function compareText({ a, b, rows }: ReturnType<typeof compareRuns>): string {
  const cell = (s: string, i: number) => (i === 0 ? s.padEnd(16) : s.padStart(22));
  const head = ['kind', ...COMPARED.map((c) => `${c.label} A -> B`)].map(cell).join(' ');
  const lines = rows.map((r) =>
    [r.name, ...COMPARED.map((c) => `${r.a[c.key].toFixed(c.digits)} -> ${r.b[c.key].toFixed(c.digits)} ${change(r.a[c.key], r.b[c.key])}`)].map(cell).join(' '),
  );
  return [
    `A: ${a.file} (${a.scenario}) ${a.verdict.ok ? 'PASS' : 'FAIL'}: ${a.verdict.headline}`,
    `B: ${b.file} (${b.scenario}) ${b.verdict.ok ? 'PASS' : 'FAIL'}: ${b.verdict.headline}`,
    head,
    ...lines,
    '',
  ].join('\n');
}

const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** Horizontal bars, A above B, per kind: plain SVG, so the page needs no script at all. */
function bars(title: string, rows: ReturnType<typeof compareRuns>['rows'], key: keyof KindNumbers, unit: string): string {
  const max = Math.max(1e-9, ...rows.flatMap((r) => [r.a[key], r.b[key]]));
  const rowHeight = 34;
  const height = rows.length * rowHeight + 10;
  const bar = (y: number, value: number, colour: string, label: string) =>
    `<rect x="160" y="${y}" width="${((value / max) * 480).toFixed(1)}" height="12" fill="${colour}"/><text x="${166 + (value / max) * 480}" y="${y + 10}" font-size="11">${label} ${value.toFixed(1)} ${unit}</text>`;
  const body = rows
    .map((r, i) => `<text x="0" y="${i * rowHeight + 18}" font-size="12">${escapeHtml(r.name)}</text>${bar(i * rowHeight + 4, r.a[key], '#2563eb', 'A')}${bar(i * rowHeight + 18, r.b[key], '#d97706', 'B')}`)
    .join('');
  return `<h2>${escapeHtml(title)}</h2><svg class="bars" data-key="${key}" width="760" height="${height}" role="img" aria-label="${escapeHtml(title)}">${body}</svg>`;
}

export function compareReport(diff: ReturnType<typeof compareRuns>): string {
  const { a, b, rows } = diff;
  const verdict = (label: string, run: Run) => `<p class="${run.verdict.ok ? 'ok' : 'bad'}">${label}: ${escapeHtml(run.file)} (${escapeHtml(run.scenario)}): ${run.verdict.ok ? 'PASS' : 'FAIL'}: ${escapeHtml(run.verdict.headline)}</p>`;
  const table = rows
    .map((r) => `<tr><td>${escapeHtml(r.name)}</td>${COMPARED.map((c) => `<td>${r.a[c.key].toFixed(c.digits)}</td><td>${r.b[c.key].toFixed(c.digits)}</td><td>${change(r.a[c.key], r.b[c.key])}</td>`).join('')}</tr>`)
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>dropstream loadtest compare</title>
<style>body { font: 14px system-ui, sans-serif; margin: 10px; color: #111; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
td:first-child { text-align: left; } .bad { color: #b91c1c; font-weight: bold; } .ok { color: #15803d; font-weight: bold; }</style></head>
<body><h1>dropstream loadtest compare: A (blue) against B (orange)</h1>
${verdict('A', a)}
${verdict('B', b)}
<table><tr><th>kind</th>${COMPARED.map((c) => `<th>${c.label} A</th><th>B</th><th>change</th>`).join('')}</tr>
${table}</table>
${bars('p50 latency by kind', rows, 'p50', 'ms')}
${bars('p99 latency by kind', rows, 'p99', 'ms')}
${bars('Throughput by kind', rows, 'mbPerSecond', 'MB/s')}
</body></html>
`;
}

export async function compare(args: string[], out: Output): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { report: { type: 'string' } } });
  if (positionals.length !== 2) throw new CliError('usage: dropstream loadtest compare A.json B.json [--report DIFF.html]');
  const diff = compareRuns(await readRun(positionals[0]!), await readRun(positionals[1]!));
  out.stdout.write(compareText(diff));
  if (values.report) await writeFile(values.report, compareReport(diff));
  return 0;
}
