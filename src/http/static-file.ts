// One file of our own sent as a response (Swagger UI's files at /docs, the
// web app's bundle at /app): the caller has already matched the name against
// its own list, so no path from the URL reaches the file system.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Context } from 'koa';

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
