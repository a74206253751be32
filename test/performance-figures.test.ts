// The figures the README and docs/ quote from a benchmark run have one
// source, bench/RESULTS.md (written by `npm run bench`): each is a link to it
// whose title names the row it comes from, `[140.2](bench/RESULTS.md "peak
// RSS, one 5 GiB upload: <= tus-node-server")`, and each must be in that row.
// A figure found only somewhere else in the file (README's [200] MiB in a
// status column) fails. A new run that changes a figure fails this test
// until the page says what the run measured.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const root = fileURLToPath(new URL('../', import.meta.url));
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `[figure](…bench/RESULTS.md "row")` links in a page, with their line numbers. */
function citedFigures(text: string): { figure: string; row?: string; line: number }[] {
  return [...text.matchAll(/\[([^\]]*\d[^\]]*)\]\((?:\.\.\/)?bench\/RESULTS\.md(?:#[^)\s]*)?(?:\s+"([^"]*)")?\)/g)].map((m) => ({
    figure: m[1]!,
    row: m[2],
    line: text.slice(0, m.index).split('\n').length,
  }));
}

/** A line of RESULTS.md as a title names it: a table row's cells joined by " / ", other lines as they are. */
const rowText = (line: string) =>
  line.trimStart().startsWith('|')
    ? line
        .split('|')
        .map((cell) => cell.trim())
        .filter((cell) => cell !== '')
        .join(' / ')
    : line.trim();

/** What is wrong with citing `figure` from the row named `row`, if anything. */
export function citationProblem(results: string, figure: string, row: string | undefined): string | undefined {
  if (!row) return 'names no row (add its row as the link title)';
  const rows = results.split('\n').filter((line) => rowText(line).includes(row));
  if (rows.length !== 1) return `"${row}" names ${rows.length} lines, not one`;
  // The figure as a whole token: 241.7 MiB is not found inside 1241.7 MiB or 241.75 MiB.
  if (!new RegExp(`(?<![\\d.])${escape(figure)}(?![\\d])`).test(rows[0]!)) return `not in its row "${row}"`;
  return undefined;
}

describe('figures quoted from bench/RESULTS.md', () => {
  it('when a page links a figure to bench/RESULTS.md, then that figure is in the row the link names', async () => {
    const results = await readFile(join(root, 'bench', 'RESULTS.md'), 'utf8');
    const pages = ['README.md', ...(await readdir(join(root, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];
    const wrong: string[] = [];
    let cited = 0;
    for (const page of pages) {
      for (const { figure, row, line } of citedFigures(await readFile(join(root, page), 'utf8'))) {
        cited++;
        const problem = citationProblem(results, figure, row);
        if (problem) wrong.push(`${page}:${line}: ${figure} ${problem}`);
      }
    }
    expect(cited, 'figures cited from bench/RESULTS.md').to.be.at.least(15);
    expect(wrong, 'figures not in the rows they cite').to.deep.equal([]);
  });

  it('when a figure is elsewhere in bench/RESULTS.md but not in the row its link names, then it is refused', () => {
    const results = ['| case | party | MiB |', '|---|---|---:|', '| GET /api/v1/stats | dropstream | 220.8 |', '| GET /api/v1/stats | 200 | 7116 |'].join('\n');
    expect(citationProblem(results, '220.8', 'GET /api/v1/stats / dropstream')).to.equal(undefined);
    // 200 is in the file (a status column), not in the row cited.
    expect(citationProblem(results, '200', 'GET /api/v1/stats / dropstream')).to.equal('not in its row "GET /api/v1/stats / dropstream"');
    expect(citationProblem(results, '220.8', 'GET /api/v1/stats')).to.equal('"GET /api/v1/stats" names 2 lines, not one');
    expect(citationProblem(results, '220.8', undefined)).to.match(/names no row/);
    expect(citationProblem(results, '20.8', 'GET /api/v1/stats / dropstream')).to.match(/not in its row/);
  });
});
