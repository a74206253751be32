// The web app for account owners (issue 46, docs/web-app.md): an HTML shell
// at /app and the assets scripts/build-web.mjs bundled into dist/web/. The
// page uses the public API like any client, same-origin, so it needs no CORS.
import Router from '@koa/router';
import { readFile } from 'node:fs/promises';
import { notFound } from '../errors.js';
import { APP_CSP, APP_PATH, sendStaticFile, WEB_DIST } from '../http/static-file.js';

const ASSETS_PATH = `${APP_PATH}/assets`;

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
};

interface Manifest {
  js: string;
  css: string;
  assets: string[];
}

const shell = ({ js, css }: Manifest) => `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>dropstream</title>
<link rel="stylesheet" href="${ASSETS_PATH}/${css}">
<script type="module" src="${ASSETS_PATH}/${js}"></script>
</head>
<body>
<div id="app"><noscript>The dropstream web app needs JavaScript. The API works without it: see /docs.</noscript></div>
</body>
</html>
`;

/** `csp`: the page's policy (appCsp(), wider for the store's origin when uploads go straight to it). */
export function webAppRoutes(dir = WEB_DIST, csp = APP_CSP) {
  const router = new Router();
  // Read on the first request: a server nobody opens /app on never reads it.
  // A checkout that was never built answers 404 with the command to run.
  let loaded: Promise<{ html: string; assets: Set<string> }> | undefined;
  const load = () =>
    (loaded ??= readFile(`${dir}/manifest.json`, 'utf8').then((text) => {
      const manifest = JSON.parse(text) as Manifest;
      return { html: shell(manifest), assets: new Set(manifest.assets) };
    }).catch((err) => {
      loaded = undefined;
      throw err;
    }));
  const built = async () => {
    try {
      return await load();
    } catch {
      throw notFound('The web app is not built: run `npm run build`');
    }
  };

  router.get(APP_PATH, async (ctx) => {
    const { html } = await built();
    ctx.set({
      'Content-Security-Policy': csp,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      // The shell names the current assets: always ask again.
      'Cache-Control': 'no-cache',
    });
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = html;
  });

  router.get(`${ASSETS_PATH}/:name`, async (ctx) => {
    const name = ctx.params.name!;
    const { assets } = await built();
    // Only the manifest's names: no path from the URL reaches the file system.
    if (!assets.has(name)) throw notFound('No such asset');
    const type = TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream';
    // The name changes with the content (esbuild's [hash]).
    await sendStaticFile(ctx, `${dir}/${name}`, type, 'public, max-age=31536000, immutable');
  });

  return router;
}
