// `node scripts/prune-runtime.mjs` (the Docker image's build stage, after
// `npm run build`): leaves in node_modules only what `dropstream` runs.
//
// - The packages package.json's `dropstream.buildOnly` names (esbuild and the
//   web app's browser libraries, bundled into dist/web/ by the build) and
//   what only they need: npm prunes them with the dev and optional ones,
//   from a package.json without them; package.json and the lockfile are
//   then put back as they were.
// - Prisma's query compilers: @prisma/client ships one per database and
//   size (about 62 MB); the generated client imports one, so the others go.
// - Source maps and type declarations of the dependencies.
//
// koffi's binary for this platform is an optional package the server needs
// (malloc_trim, TCP_INFO): it is set aside and put back around the prune.
// Prints what went, in MB. Idempotent.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const modules = join(root, 'node_modules');

/** Files under `dir`, recursively. */
async function* walk(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile()) yield path;
  }
}

/** Bytes under `dir`. */
async function size(dir) {
  let total = 0;
  for await (const file of walk(dir)) total += (await stat(file)).size;
  return total;
}

/** The @prisma/client/runtime files the generated client imports (dist/generated). */
export async function runtimeFilesImported(generatedDir) {
  const names = new Set();
  for await (const file of walk(generatedDir)) {
    if (!/\.(c|m)?js$/.test(file)) continue;
    for (const match of (await readFile(file, 'utf8')).matchAll(/@prisma\/client\/runtime\/([\w.-]+)/g)) names.add(match[1]);
  }
  return names;
}

/** Whether a file of @prisma/client/runtime is a query compiler the generated client does not import. */
export function unusedCompiler(name, imported) {
  if (!name.startsWith('query_compiler_')) return false;
  return ![...imported].some((kept) => name === kept || name.startsWith(`${kept.replace(/\.(c|m)?js$/, '')}.`));
}

/** Whether a dependency's file is a source map or a type declaration. */
export const notRun = (name) => /\.(map|d\.ts|d\.mts|d\.cts)$/.test(name);

async function prunePackages() {
  const manifestPath = join(root, 'package.json');
  const lockPath = join(root, 'package-lock.json');
  const original = await readFile(manifestPath, 'utf8');
  const lock = await readFile(lockPath, 'utf8');
  const manifest = JSON.parse(original);
  const buildOnly = manifest.dropstream?.buildOnly ?? [];
  for (const name of buildOnly) delete manifest.dependencies[name];
  const koffi = join(modules, '@koromix');
  const aside = join(root, '.koffi-binary');
  // Copied, not renamed: in an image's build a folder of an earlier layer cannot be renamed (EXDEV).
  const setAside = existsSync(koffi);
  if (setAside) await cp(koffi, aside, { recursive: true });
  try {
    await writeFile(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    execFileSync('npm', ['prune', '--omit=dev', '--omit=optional', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  } finally {
    await writeFile(manifestPath, original);
    await writeFile(lockPath, lock);
    if (setAside) {
      await cp(aside, koffi, { recursive: true });
      await rm(aside, { recursive: true });
    }
  }
  return buildOnly;
}

async function main() {
  const before = await size(modules);
  const buildOnly = await prunePackages();
  const imported = await runtimeFilesImported(join(root, 'dist', 'generated'));
  if (![...imported].some((name) => name.startsWith('query_compiler_'))) {
    throw new Error('prune-runtime: dist/generated imports no Prisma query compiler: build first (npm run build)');
  }
  const runtime = join(modules, '@prisma', 'client', 'runtime');
  for (const name of await readdir(runtime)) if (unusedCompiler(name, imported)) await rm(join(runtime, name));
  for await (const file of walk(modules)) if (notRun(file)) await rm(file);
  const after = await size(modules);
  const mb = (n) => (n / 1e6).toFixed(1);
  console.log(`prune-runtime: node_modules ${mb(before)} -> ${mb(after)} MB (build-only: ${buildOnly.join(', ')}; kept of ${relative(root, runtime)}: ${[...imported].filter((n) => n.startsWith('query_compiler_')).join(', ')})`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
