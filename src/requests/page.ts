// The upload page of a file request, GET /r/{token} (web/request.ts): an
// HTML shell naming the bundled assets (served under /app/assets by
// web-app-routes.ts) with the request's title and limits as data
// attributes, under the web app's CSP (no inline script).
import type { Context } from 'koa';
import { readFile } from 'node:fs/promises';
import { AppError, notFound } from '../errors.js';
import type { FileRequest } from './service.js';
import { formatOptionalDate } from '../wire-date.js';
import { APP_CSP, APP_PATH, WEB_DIST } from '../http/static-file.js';

interface Manifest {
  request?: { js: string; css: string };
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

let assets: Promise<{ js: string; css: string }> | undefined;
const load = (dir: string) =>
  (assets ??= readFile(`${dir}/manifest.json`, 'utf8').then((text) => {
    const page = (JSON.parse(text) as Manifest).request;
    if (!page) throw new Error('no request page in the manifest');
    return page;
  }).catch((err) => {
    assets = undefined;
    throw err;
  }));

const pageHeaders = (csp: string) => ({ 'Content-Security-Policy': csp, 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store' });

/** Answers an HTML page of file request links: `title` (plain text), `head` and `main` (markup), under `csp`. */
function sendPage(ctx: Context, { title, head, main }: { title: string; head: string; main: string }, csp = APP_CSP): void {
  ctx.set(pageHeaders(csp));
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex">
<title>${escape(title)} - dropstream</title>
${head}
</head>
<body>
${main}
</body>
</html>
`;
}

/** The refusals that mean the link takes no more files (a page not built, say, is not one). */
const ENDED = new Set<string>(['request_not_found', 'request_expired', 'request_full']);

/**
 * A browser that opens a link whose request is closed, unknown, expired or
 * full gets a page saying so, with the refusal's status; any other client
 * (curl's Accept is any type) keeps the JSON error every route answers.
 * Other refusals (a password asked for, a limit) are left to the JSON
 * handler: a 401's WWW-Authenticate makes the browser ask for the password.
 */
export async function refusalAsPage(ctx: Context, next: () => Promise<unknown>): Promise<void> {
  try {
    await next();
  } catch (err) {
    if (!(err instanceof AppError) || !ENDED.has(err.code) || ctx.accepts('json', 'html') !== 'html') throw err;
    // The upload page's stylesheet, when it is built; the page reads without it.
    const css = await load(WEB_DIST).then((page) => `<link rel="stylesheet" href="${APP_PATH}/assets/${page.css}">`, () => '');
    ctx.status = err.status;
    sendPage(ctx, {
      title: 'No uploads here',
      head: css,
      main: `<main><h1>This link takes no more files</h1><p id="reason">${escape(err.message)}.</p><p>Ask whoever sent you the link for a new one.</p></main>`,
    });
  }
}

/** The upload page; `csp` lets it reach the store when uploads go straight to it (appCsp). */
export async function requestPage(ctx: Context, request: FileRequest, csp = APP_CSP, dir = WEB_DIST): Promise<void> {
  let page;
  try {
    page = await load(dir);
  } catch {
    throw notFound('The upload page is not built: run `npm run build`');
  }
  const data = {
    endpoint: `${ctx.path.replace(/\/+$/, '')}/uploads`,
    title: request.title ?? '',
    'max-files': request.maxFiles === null ? '' : String(request.maxFiles),
    'max-file-size': request.maxFileSize === null ? '' : String(Math.min(request.maxFileSize, ctx.state.caller.plan.maxFileSize)),
    'expires-at': formatOptionalDate(request.expiresAt) ?? '',
  };
  const attributes = Object.entries(data).map(([name, value]) => `data-${name}="${escape(value)}"`).join(' ');
  sendPage(ctx, {
    title: request.title ?? 'Send files',
    head: `<link rel="stylesheet" href="${APP_PATH}/assets/${page.css}">\n<script type="module" src="${APP_PATH}/assets/${page.js}"></script>`,
    main: `<main id="request" ${attributes}><noscript>This page needs JavaScript. Without it: curl -F "file=@yourfile" ${escape(ctx.path.replace(/\/+$/, ''))}/files</noscript></main>`,
  }, csp);
}
