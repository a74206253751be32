// The figures the README and docs/ quote from a benchmark run have one
// source, bench/RESULTS.md (written by `npm run bench`): each is a link to it,
// and each must be in it. A new run that changes a figure fails this test
// until the page says what the run measured.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const root = fileURLToPath(new URL('../', import.meta.url));
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `[figure](…bench/RESULTS.md…)` links in a page, with their line numbers. */
function citedFigures(text: string): { figure: string; line: number }[] {
  return [...text.matchAll(/\[([^\]]*\d[^\]]*)\]\((?:\.\.\/)?bench\/RESULTS\.md(?:#[^)]*)?\)/g)].map((m) => ({
    figure: m[1]!,
    line: text.slice(0, m.index).split('\n').length,
  }));
}

describe('figures quoted from bench/RESULTS.md', () => {
  it('when a page links a figure to bench/RESULTS.md, then that figure is in it', async () => {
    const results = await readFile(join(root, 'bench', 'RESULTS.md'), 'utf8');
    const pages = ['README.md', ...(await readdir(join(root, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];
    const missing: string[] = [];
    let cited = 0;
    for (const page of pages) {
      for (const { figure, line } of citedFigures(await readFile(join(root, page), 'utf8'))) {
        cited++;
        // The figure as a whole token: 241.7 MiB is not found inside 1241.7 MiB or 241.75 MiB.
        if (!new RegExp(`(?<![\\d.])${escape(figure)}(?![\\d])`).test(results)) missing.push(`${page}:${line}: ${figure}`);
      }
    }
    expect(cited, 'figures cited from bench/RESULTS.md').to.be.at.least(15);
    expect(missing, 'figures not in bench/RESULTS.md').to.deep.equal([]);
  });
});
