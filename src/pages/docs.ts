import Router from '@koa/router';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { notFound } from '../errors.js';
import { sendStaticFile } from '../http/static-file.js';
import { APP_CSP } from '../http/static-file.js';
import type { RouteScopes } from '../http/scoped.js';

export const OPENAPI_PATH = '/api/v1/openapi.json';
export const DOCS_PATH = '/docs';
const ASSETS_PATH = `${DOCS_PATH}/assets`;

/**
 * The only files served from swagger-ui-dist, by exact name: a request for
 * anything else (another file of the package, `../package.json`) is 404, so
 * no path from the URL ever reaches the file system.
 */
const ASSETS = new Map([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8'],
]);

const swaggerUiDir = () => dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/**
 * Swagger UI's start, a file of its own (issue 50): the page runs under the
 * web app's CSP, which allows no inline script. validatorUrl: null keeps
 * the page from calling validator.swagger.io.
 */
const INIT_NAME = 'init.js';
const init = `SwaggerUIBundle({ url: '${OPENAPI_PATH}', dom_id: '#swagger-ui', validatorUrl: null, deepLinking: true });\n`;

const page = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dropstream API</title>
<link rel="stylesheet" href="${ASSETS_PATH}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="${ASSETS_PATH}/${INIT_NAME}"></script>
</body>
</html>
`;

/**
 * The API description and a Swagger UI page to read it, without a key and
 * without any CDN: the viewer's files are served from our own dependency.
 * The page is on the web app's origin, so it gets the web app's CSP: our
 * own scripts and styles only, and no framing by other pages
 * (frame-ancestors 'none'), which would let them dress up "Try it out".
 */
export function docsRoutes(publicUrl: string, scopes: () => RouteScopes) {
  const router = new Router();
  // Built on its first request: a server nobody reads the docs of never loads
  // the description. Swagger UI's files are read from disk per request.
  let document: string | undefined;
  const dir = swaggerUiDir();

  router.get(OPENAPI_PATH, async (ctx) => {
    document ??= JSON.stringify((await import('../openapi/document.js')).openApiDocument(publicUrl, scopes()));
    ctx.type = 'application/json';
    ctx.body = document;
  });

  router.get(DOCS_PATH, (ctx) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.set({ 'Content-Security-Policy': APP_CSP, 'X-Content-Type-Options': 'nosniff' });
    ctx.body = page;
  });

  router.get(`${ASSETS_PATH}/${INIT_NAME}`, (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set({ 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'public, max-age=3600' });
    ctx.body = init;
  });

  router.get(`${ASSETS_PATH}/:name`, async (ctx) => {
    const name = ctx.params.name!;
    const type = ASSETS.get(name);
    if (!type) throw notFound('No such asset');
    await sendStaticFile(ctx, join(dir, name), type, 'public, max-age=3600');
  });

  return router;
}
