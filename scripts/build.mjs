// `npm run build`: the Prisma client (scripts/generate.mjs), TypeScript to
// dist/ (tsconfig.build.json: emit only, no type check; `npm run typecheck`
// and CI check types), and the embedded database's template
// (scripts/pglite-template.mjs), and the web app's assets
// (scripts/build-web.mjs: web/ bundled by esbuild). Then it stamps dist/
// with a hash of what it was built from.
//
// `--if-needed` (postinstall, prestart) builds only when dist/ is missing or
// was built from other sources, and only when the build tools are
// installed. A production install (`npm ci --omit=dev`) has them as optional
// peers of @prisma/client, and the build needs no type packages, so a fresh
// clone builds there too. An install without them (`--omit=optional`, as in
// the Docker image) keeps the dist/ it was given; without one it says so and
// leaves the install alone, so `npm ci --omit=dev --omit=optional` can run
// before dist/ is copied in.
//
// A tarball (`npm pack`; package.json's `files`) ships the dist/ that
// prepack built and no sources: installed from it (`npm install -g
// ./dropstream-*.tgz`) there is nothing to build, and none of the build tools.
//
// dist/build-info.json names the commit the build was made from (what
// `dropstream --version`, /metrics and the start-up line report:
// src/version.ts; how it is found: scripts/build-info.mjs).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildCommit } from './build-info.mjs';

const root = fileURLToPath(new URL('../', import.meta.url));
const stampPath = join(root, 'dist', '.build-stamp');
const INPUTS = [
  'src',
  'prisma',
  'scripts/build.mjs',
  'scripts/build-info.mjs',
  'scripts/build-web.mjs',
  'web',
  'scripts/generate.mjs',
  'scripts/pglite-template.mjs',
  'prisma.config.ts',
  'tsconfig.json',
  'tsconfig.build.json',
  'package-lock.json',
];

/** The files under `path` (itself, if a file); none if it does not exist. */
async function files(path) {
  const entries = await readdir(path, { withFileTypes: true }).catch((err) => {
    if (err.code === 'ENOTDIR') return null;
    // A copy without an input (a tarball has no package-lock.json: npm pack
    // never ships it) hashes what it has rather than failing.
    if (err.code === 'ENOENT') return [];
    return Promise.reject(err);
  });
  if (!entries) return [path];
  const nested = await Promise.all(
    entries
      .filter((e) => !(e.isDirectory() && relative(root, join(path, e.name)) === join('src', 'generated')))
      .map((e) => files(join(path, e.name))),
  );
  return nested.flat();
}

/** A hash of every input's path and content. */
async function sourceHash() {
  const hash = createHash('sha256');
  for (const input of INPUTS) {
    for (const file of (await files(join(root, input))).sort()) {
      hash.update(`${relative(root, file)}\0`);
      hash.update(await readFile(file));
      hash.update('\0');
    }
  }
  return hash.digest('hex');
}

function haveBuildTools() {
  const require = createRequire(join(root, 'package.json'));
  try {
    require.resolve('typescript/package.json');
    require.resolve('prisma/package.json');
    require.resolve('esbuild/package.json');
    return true;
  } catch {
    return false;
  }
}

/** Writes dist/build-info.json unless it already says this; a read-only dist/ keeps what it has. */
async function recordCommit() {
  const path = join(root, 'dist', 'build-info.json');
  const text = `${JSON.stringify({ commit: buildCommit(root, INPUTS) })}\n`;
  if ((await readFile(path, 'utf8').catch(() => '')) === text) return;
  await writeFile(path, text).catch(() => {});
}

function run(args) {
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

const ifNeeded = process.argv.includes('--if-needed');
// Dependencies installed before the sources are there (a Docker layer that
// copies package*.json first), or from a tarball, which holds dist/ instead.
if (ifNeeded && !existsSync(join(root, 'src'))) process.exit(0);
const hash = await sourceHash();
const stamp = await readFile(stampPath, 'utf8').then((s) => s.trim(), () => undefined);
if (ifNeeded && stamp === hash) {
  // The same sources at another commit (a change to docs or tests only): the build stands for it too.
  await recordCommit();
  process.exit(0);
}
if (ifNeeded && !haveBuildTools()) {
  process.stderr.write(
    stamp
      ? 'dropstream: dist/ was built from other sources and the build tools are not installed; using it as it is\n'
      : 'dropstream: no build in dist/ and no build tools installed (typescript, prisma, esbuild): build with `npm ci && npm run build`, or copy dist/ from a build\n',
  );
  process.exit(0);
}
const started = Date.now();
run([join(root, 'scripts', 'generate.mjs')]);
const typescript = dirname(createRequire(join(root, 'package.json')).resolve('typescript/package.json'));
run([join(typescript, 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')]);
run([join(root, 'scripts', 'pglite-template.mjs')]);
run([join(root, 'scripts', 'build-web.mjs')]);
await recordCommit();
await writeFile(stampPath, `${hash}\n`);
if (ifNeeded) console.log(`dropstream: built dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`);
