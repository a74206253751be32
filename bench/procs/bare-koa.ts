// The framework's limit for the metadata endpoints: a bare Koa app that
// answers each URL with the JSON our server gave for it, kept in memory and
// serialised per request as Koa does for ours. No router, no auth, no
// database, no rate limit, no log line.
//   node bare-koa.js <responses.json: {"<url>": <body>}>  -> {"url"}
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';

const responses = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Record<string, unknown>;
const app = new Koa();
app.use((ctx) => {
  const body = responses[ctx.url];
  if (body === undefined) return void (ctx.status = 404);
  ctx.body = body;
});
const server = createServer(app.callback());
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => process.exit(0));
