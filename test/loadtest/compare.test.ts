// `dropstream loadtest compare A.json B.json [--report DIFF.html]`: the
// per-kind differences of two runs' summaries, printed and drawn.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { loadtest } from '../../src/cli/loadtest/index.js';

/** A summary as `--json` writes it, with only what compare reads. */
function summary(kinds: Record<string, [requests: number, errors: number, throttled: number, p50: number, p99: number, mbPerSecond: number]>, verdict: { ok: boolean; headline: string }) {
  const entries = Object.entries(kinds).map(([name, [requests, errors, throttled, p50, p99, mbPerSecond]]) => [name, { requests, errors, throttled, p50, p99, mbPerSecond }] as const);
  const sum = (i: 'requests' | 'errors' | 'throttled' | 'mbPerSecond') => entries.reduce((n, [, k]) => n + k[i], 0);
  return { parameters: { scenario: 'mixed' }, kinds: Object.fromEntries(entries), requests: sum('requests'), errors: sum('errors'), throttled: sum('throttled'), p50Ms: 10, p99Ms: 100, mbPerSecond: sum('mbPerSecond'), verdict };
}

describe('dropstream loadtest compare', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dropstream-compare-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const run = async (args: string[]) => {
    let stdout = '';
    const code = await loadtest(['compare', ...args], {}, { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: () => true } });
    return { code, stdout };
  };

  it('when two summaries are compared, then each kind and the totals show A -> B with the change, and the report draws both runs per kind', async () => {
    const a = join(dir, 'a.json');
    const b = join(dir, 'b.json');
    await writeFile(a, JSON.stringify(summary({ upload: [100, 0, 0, 20, 80, 50], list: [40, 2, 30, 2, 9, 0.01] }, { ok: false, headline: 'the plan\'s limits refused 21% of requests' })));
    await writeFile(b, JSON.stringify(summary({ upload: [120, 1, 0, 30, 60, 75], info: [10, 0, 0, 3, 4, 0.02] }, { ok: true, headline: 'all good' })));
    const report = join(dir, 'diff.html');
    const { code, stdout } = await run([a, b, '--report', report]);
    expect(code).to.equal(0);
    const lines = stdout.split('\n');
    expect(lines[0]).to.equal(`A: ${a} (mixed) FAIL: the plan's limits refused 21% of requests`);
    expect(lines[1]).to.equal(`B: ${b} (mixed) PASS: all good`);
    const row = (kind: string) => lines.find((line) => line.startsWith(kind.padEnd(16)))?.slice(16).trim().split(/\s{2,}/);
    expect(row('upload')).to.deep.equal(['100 -> 120 +20%', '0 -> 1 new', '0 -> 0 0%', '20.0 -> 30.0 +50%', '80.0 -> 60.0 -25%', '50.00 -> 75.00 +50%']);
    expect(row('list')).to.deep.equal(['40 -> 0 -100%', '2 -> 0 -100%', '30 -> 0 -100%', '2.0 -> 0.0 -100%', '9.0 -> 0.0 -100%', '0.01 -> 0.00 -100%']);
    expect(row('info')?.[0]).to.equal('0 -> 10 new');
    expect(row('total')?.[0]).to.equal('140 -> 130 -7%');

    const html = await readFile(report, 'utf8');
    expect(html).to.match(/<p class="bad">A: .*FAIL/);
    expect(html).to.match(/<p class="ok">B: .*PASS/);
    // Three charts (p50, p99, MB/s), each with a bar for A and one for B per kind and the totals.
    const charts = html.match(/<svg class="bars"[^]*?<\/svg>/g) ?? [];
    expect(charts.length).to.equal(3);
    for (const chart of charts) expect(chart.match(/<rect /g)?.length).to.equal(2 * 4);
  });

  it('when a file is not a loadtest summary, then one line says which and why', async () => {
    const a = join(dir, 'not.json');
    await writeFile(a, '{"hello": 1}');
    const error = await run([a, a]).catch((err: unknown) => err);
    // A CliError: the command prints its message as one line (by name: tsx may load the module twice).
    expect((error as Error).constructor.name).to.equal('CliError');
    expect((error as Error).message).to.equal(`${a} is not a loadtest JSON summary (no kinds or requests)`);
    const missing = await run([a]).catch((err: unknown) => err);
    expect((missing as Error).message).to.match(/^usage: dropstream loadtest compare A.json B.json/);
  });
});
