// The README is the front door: every environment variable the code reads
// (the server's settings, the CLI's, the test suite's) is named there.
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

describe('README', () => {
  it('when the code reads an environment variable, then the README names it', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const read = new Set(configVariables);
    for (const file of [...(await sources('src')), ...(await sources(join('test', 'helpers')))]) {
      for (const [, name] of (await readFile(join(root, file), 'utf8')).matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)) read.add(name!);
    }
    expect(read.size).to.be.above(30);
    const missing = [...read].filter((name) => !NOT_SETTINGS.has(name) && !readme.includes(`\`${name}\``)).sort();
    expect(missing, 'variables missing from README.md').to.deep.equal([]);
  });
});
