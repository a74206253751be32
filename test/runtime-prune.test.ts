// What the Docker image's build stage leaves in node_modules
// (scripts/prune-runtime.mjs): the pruning itself runs in the image's build
// (.ci/docker-smoke builds and runs it); these check the facts it relies on.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
// @ts-expect-error: a plain ES module of the build, without declarations.
import { notRun, runtimeFilesImported, unusedCompiler } from '../scripts/prune-runtime.mjs';

const root = new URL('..', import.meta.url).pathname;
const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; dropstream?: { buildOnly?: string[] } };
const buildOnly = manifest.dropstream?.buildOnly ?? [];

async function* walk(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else yield path;
  }
}

describe('the runtime image keeps only what runs (scripts/prune-runtime.mjs)', () => {
  it('when a package is build-only, then it is a dependency that no module the server runs imports (only the web bundle and the build do)', async () => {
    expect(buildOnly).to.include('esbuild');
    for (const name of buildOnly) expect(manifest.dependencies, name).to.have.property(name);
    const importers: string[] = [];
    for (const dir of ['src', 'bin']) {
      for await (const file of walk(join(root, dir))) {
        if (!/\.(ts|js|mjs|cjs)$/.test(file) || file.includes(`${join('src', 'generated')}`)) continue;
        const text = await readFile(file, 'utf8');
        for (const name of buildOnly) {
          const escaped = name.replace(/[/.]/g, '\\$&');
          if (new RegExp(`(from|import|require)\\s*\\(?\\s*['"]${escaped}(/[^'"]*)?['"]`).test(text)) importers.push(`${file.slice(root.length)} imports ${name}`);
        }
      }
    }
    expect(importers).to.deep.equal([]);
  });

  it('when the query compilers are pruned, then the one the generated client imports stays and the other database and size variants go', async () => {
    const imported: Set<string> = await runtimeFilesImported(join(root, 'dist', 'generated'));
    const compilers = [...imported].filter((name) => name.startsWith('query_compiler_'));
    expect(compilers, 'the generated client imports a query compiler').to.not.be.empty;
    const shipped = (await readdir(join(root, 'node_modules', '@prisma', 'client', 'runtime'))).filter((name) => name.startsWith('query_compiler_'));
    for (const name of compilers) expect(shipped, `${name} is shipped`).to.include(name);
    const kept = shipped.filter((name) => !unusedCompiler(name, imported));
    expect(kept.sort(), 'kept').to.include.members(compilers);
    expect(kept.every((name) => name.includes('.postgresql.')), `kept: ${kept.join(', ')}`).to.equal(true);
    expect(shipped.length - kept.length, 'compilers removed').to.be.at.least(shipped.length / 2);
  });

  it("when a dependency's file is a source map or a type declaration, then it goes; code, JSON and WebAssembly stay", () => {
    for (const name of ['a.js.map', 'index.d.ts', 'index.d.mts', 'x.d.cts', 'span.d.mts.map']) expect(notRun(name), name).to.equal(true);
    for (const name of ['index.js', 'index.mjs', 'x.cjs', 'package.json', 'pglite.wasm', 'query_compiler_small_bg.postgresql.wasm-base64.mjs', 'map.js', 'd.ts.js']) {
      expect(notRun(name), name).to.equal(false);
    }
  });

  it('when the image is built, then its build stage prunes with the script after building', async () => {
    const dockerfile = (await readFile(join(root, 'Dockerfile'), 'utf8')).replace(/\\\n/g, ' ');
    const build = dockerfile.indexOf('npm run build');
    const prune = dockerfile.indexOf('RUN node scripts/prune-runtime.mjs');
    expect(build).to.be.above(0);
    expect(prune, 'the prune runs after the build').to.be.above(build);
    expect(prune, 'in the build stage').to.be.below(dockerfile.indexOf('AS runtime'));
  });
});
