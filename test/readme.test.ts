// The documentation names every environment variable the code reads: the
// server's settings in the configuration reference (docs/configuration.md),
// the CLI's and the test suite's in the README or a page under docs/.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { configVariables } from '../src/config.js';

const root = fileURLToPath(new URL('../', import.meta.url));
/** Read by the code but not a setting for people: CI marks CI runs. */
const NOT_SETTINGS = new Set(['CI']);

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(join(root, dir), { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return path === join('src', 'generated') ? [] : sources(path);
      return e.name.endsWith('.ts') ? [path] : [];
    }),
  );
  return nested.flat();
}

/** README.md and every page under docs/, the places a reader looks. */
async function documentation(): Promise<string> {
  const pages = (await readdir(join(root, 'docs'))).filter((name) => name.endsWith('.md')).map((name) => join('docs', name));
  const texts = await Promise.all(['README.md', ...pages].map((file) => readFile(join(root, file), 'utf8')));
  return texts.join('\n');
}

describe('README and docs/', () => {
  it('when the server reads a setting, then the configuration reference names it', async () => {
    const reference = await readFile(join(root, 'docs', 'configuration.md'), 'utf8');
    expect(configVariables.length).to.be.above(25);
    const missing = configVariables.filter((name) => !reference.includes(`\`${name}\``)).sort();
    expect(missing, 'settings missing from docs/configuration.md').to.deep.equal([]);
  });

  it('when the code reads an environment variable, then the README or a page under docs/ names it', async () => {
    const docs = await documentation();
    const read = new Set(configVariables);
    for (const file of [...(await sources('src')), ...(await sources(join('test', 'helpers')))]) {
      for (const [, name] of (await readFile(join(root, file), 'utf8')).matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)) read.add(name!);
    }
    expect(read.size).to.be.above(30);
    const missing = [...read].filter((name) => !NOT_SETTINGS.has(name) && !docs.includes(`\`${name}\``)).sort();
    expect(missing, 'variables missing from README.md and docs/').to.deep.equal([]);
  });

  it('when a page links to another page or a heading, then that page and heading exist', async () => {
    const pages = ['README.md', ...(await readdir(join(root, 'docs'))).filter((n) => n.endsWith('.md')).map((n) => join('docs', n))];
    const anchors = new Map<string, Set<string>>();
    // bench/RESULTS.md is linked to (test/performance-figures.test.ts) but is no page of the docs.
    for (const page of [...pages, join('bench', 'RESULTS.md')]) {
      const text = await readFile(join(root, page), 'utf8');
      const slugs = [...text.replace(/```[\s\S]*?```/g, '').matchAll(/^#+ (.+)$/gm)].map(([, h]) =>
        h!.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-'),
      );
      anchors.set(page, new Set(slugs));
    }
    const broken: string[] = [];
    for (const page of pages) {
      const text = await readFile(join(root, page), 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [file, anchor] = target!.split('#');
        const resolved = file ? join(page, '..', file) : page;
        if (!resolved.endsWith('.md')) continue;
        if (!anchors.has(resolved)) broken.push(`${page}: ${target}`);
        else if (anchor && !anchors.get(resolved)!.has(anchor)) broken.push(`${page}: ${target}`);
      }
    }
    expect(broken).to.deep.equal([]);
  });
});
