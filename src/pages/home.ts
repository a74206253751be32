// GET / on the public listener: where a person who opened the server's
// address in a browser (or curl'ed it) goes next, instead of 404 "No such
// route". Only what this server answers is linked.
import Router from '@koa/router';
import { DOCS_PATH, OPENAPI_PATH } from './docs.js';
import { APP_PATH } from '../http/static-file.js';

const API_PATH = '/api/v1';
const README = 'README.md in the dropstream repository (and its npm package): running it, curl examples, configuration';

const page = (publicUrl: string) => `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dropstream</title>
</head>
<body>
<h1>dropstream</h1>
<p>A file-sharing service with a REST API. This server answers:</p>
<ul>
<li><a href="${APP_PATH}">the web app</a>: sign in with an API key to upload, list, share and revoke files</li>
<li><a href="${DOCS_PATH}">API documentation</a> (Swagger UI), and the <a href="${OPENAPI_PATH}">OpenAPI description</a></li>
<li>the API itself under <code>${publicUrl}${API_PATH}</code> (every request carries <code>Authorization: Bearer &lt;API key&gt;</code>)</li>
<li>download links, <code>${publicUrl}/download/&lt;token&gt;</code></li>
</ul>
<p>Getting started: ${README}.</p>
</body>
</html>
`;

export function homeRoute(publicUrl: string) {
  const router = new Router();
  // The HTML is built once: publicUrl is the operator's setting, never the request's Host.
  const html = page(escapeHtml(publicUrl));
  const json = {
    success: true,
    service: 'dropstream',
    app: `${publicUrl}${APP_PATH}`,
    docs: `${publicUrl}${DOCS_PATH}`,
    openapi: `${publicUrl}${OPENAPI_PATH}`,
    api: `${publicUrl}${API_PATH}`,
    readme: README,
  };
  router.get('/', (ctx) => {
    ctx.set({ Vary: 'Accept', 'X-Content-Type-Options': 'nosniff' });
    // A browser asks for text/html first; curl sends */* and gets JSON, like the rest of the API.
    if (ctx.accepts('json', 'html') === 'html') {
      // No scripts, styles or images: nothing for the page to load.
      ctx.set('Content-Security-Policy', "default-src 'none'");
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = html;
      return;
    }
    ctx.body = json;
  });
  return router;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
