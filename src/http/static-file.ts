// One file of our own sent as a response (Swagger UI's files at /docs, the
// web app's bundle at /app, a file request's page), where the web app's
// build is, and the CSP its pages run under. The caller has already matched the name against
// its own list, so no path from the URL reaches the file system.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Context } from 'koa';
import { fileURLToPath } from 'node:url';

/** Answers GET (and HEAD, headers only) with the file at `path`. */
export async function sendStaticFile(ctx: Context, path: string, type: string, cacheControl: string): Promise<void> {
  const { size } = await stat(path);
  ctx.type = type;
  ctx.length = size;
  ctx.set({ 'X-Content-Type-Options': 'nosniff', 'Cache-Control': cacheControl });
  if (ctx.method === 'HEAD') {
    ctx.status = 200;
    return;
  }
  // Koa sends a stream body with stream.pipeline and destroys it when the response ends.
  ctx.body = createReadStream(path);
}

/** Where the web app is served (src/pages/web-app.ts). */
export const APP_PATH = '/app';

/** dist/web/, from src/http/ (tests, tsx) and from dist/http/ (the built server) alike. */
export const WEB_DIST = fileURLToPath(new URL('../../dist/web/', import.meta.url));

/**
 * The page may load only our own files. Uppy's stylesheet draws its icons as
 * data: SVG backgrounds, so images may also be data: (an image cannot run
 * script); scripts and styles are 'self' only, without 'unsafe-inline' or
 * 'unsafe-eval'. Uppy sets element styles through the DOM, which CSP allows.
 * `connectTo`: origins the upload pages send bytes to besides their own:
 * the store's, when uploads go straight to it (S3_DIRECT_UPLOADS); nothing
 * else widens.
 */
export function appCsp(connectTo: readonly string[] = []): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    ["connect-src 'self'", ...connectTo].join(' '),
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The pages' CSP when they talk to their own origin only. */
export const APP_CSP = appCsp();
