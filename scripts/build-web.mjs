// The web app's static assets (/app, docs/web-app.md): web/main.ts and the
// CSS it imports (Uppy's and ours) bundled by esbuild into dist/web/, with
// the content's hash in every name so the server can mark them immutable.
// dist/web/manifest.json names the current files; the server serves only
// those. Called by scripts/build.mjs; `node scripts/build-web.mjs` alone
// rebuilds just the page.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../', import.meta.url));
const outdir = join(root, 'dist', 'web');

export async function buildWeb() {
  // Old hashed files would otherwise pile up in dist/ (and in the npm tarball).
  await rm(outdir, { recursive: true, force: true });
  await mkdir(outdir, { recursive: true });
  const result = await build({
    // The web app, and the upload page of a file request (/r/{token}), built from the same parts.
    entryPoints: { app: join(root, 'web', 'main.ts'), request: join(root, 'web', 'request.ts') },
    bundle: true,
    format: 'esm',
    target: ['es2022'],
    minify: true,
    sourcemap: false,
    legalComments: 'linked',
    entryNames: '[name]-[hash]',
    outdir,
    metafile: true,
    logLevel: 'warning',
  });
  const names = Object.keys(result.metafile.outputs).map((path) => basename(path));
  const entry = (name, ext) => names.find((file) => file.startsWith(`${name}-`) && file.endsWith(ext));
  const [js, css, requestJs, requestCss] = [entry('app', '.js'), entry('app', '.css'), entry('request', '.js'), entry('request', '.css')];
  if (!js || !css || !requestJs || !requestCss) throw new Error(`build-web: expected a .js and a .css per page, got ${names.join(', ')}`);
  const assets = (await readdir(outdir)).filter((name) => name !== 'manifest.json');
  await writeFile(join(outdir, 'manifest.json'), `${JSON.stringify({ js, css, request: { js: requestJs, css: requestCss }, assets }, null, 2)}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await buildWeb();
