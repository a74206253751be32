// What a server loads depends on what its configuration uses (issue 24): no
// AWS SDK on the local store, no ioredis without REDIS_URL, one database
// driver. A child process (the compiled build) records every module it loads
// through a module hook, starts a server, asks it for the OpenAPI document,
// sends the admin API a JSON body that is not JSON and then one that is (the
// body parser's first use, issue 54), and prints what was loaded before and
// after and what the JSON requests were answered.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { backends, createTestDatabase } from './helpers/databases.js';

const root = resolve(import.meta.dirname, '..');
const rootUrl = `${pathToFileURL(root).href}/`;

const script = `
import { registerHooks } from 'node:module';
const loaded = [];
registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
const { loadConfig } = await import('./dist/config.js');
const { createLogger } = await import('./dist/server.js');
const { startServer } = await import('./dist/start.js');
const server = await startServer(loadConfig(process.env), createLogger('silent'));
const atStart = [...loaded];
const res = await fetch(server.url + '/api/v1/openapi.json');
if (res.status !== 200) throw new Error('openapi.json answered ' + res.status);
await res.arrayBuffer();
const afterDocs = [...loaded];
const post = (body) => fetch(server.adminUrl + '/admin/accounts', { method: 'POST', headers: { Authorization: 'Bearer ' + process.env.ADMIN_TOKEN, 'Content-Type': 'application/json' }, body });
const bad = await post('{"email": ');
const good = await post(JSON.stringify({ plan: 'free', email: 'first-body@example.com' }));
const json = { bad: bad.status, badCode: (await bad.json()).error?.code, good: good.status, goodBody: await good.json() };
await server.close();
process.stdout.write(JSON.stringify({ atStart, afterDocs, afterJson: loaded, json }));
`;

interface Loaded {
  atStart: string[];
  afterDocs: string[];
  afterJson: string[];
  json: { bad: number; badCode?: string; good: number; goodBody: { account_id?: number } };
}

async function modulesLoaded(env: Record<string, string>): Promise<Loaded> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    env: { PATH: process.env.PATH, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', ADMIN_TOKEN: 'a'.repeat(32), GC_INTERVAL: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise((done) => child.once('close', done));
  expect(code, err).to.equal(0);
  return JSON.parse(out);
}

/** The packages among `urls`, by name (`@aws-sdk/client-s3`, `pg`), and our own modules as `dist/...`. */
function names(urls: string[]): Set<string> {
  const found = new Set<string>();
  for (const url of urls) {
    const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (pkg) found.add(pkg[1]!);
    else if (url.startsWith(`${rootUrl}dist/`)) found.add(url.slice(rootUrl.length));
  }
  return found;
}

describe('modules a server loads', function () {
  this.timeout(60_000);
  let dataDir: string;
  // One start of the embedded default serves the three tests of it (a start costs
  // 5 s of CI); a test run alone starts its own.
  let embedded: Promise<Loaded> | undefined;
  const embeddedServer = () => (embedded ??= modulesLoaded({ DATA_DIR: dataDir }));

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-modules-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when the store is local, the database embedded and Redis unset, then neither the AWS SDK nor ioredis nor pg is loaded, and the OpenAPI description only when asked for', async () => {
    const { atStart, afterDocs } = await embeddedServer();
    const start = names(atStart);
    // The hook sees what the server does load (the check could fail).
    expect(start).to.include('dist/storage/local.js').and.include('@electric-sql/pglite').and.include('rate-limiter-flexible');
    for (const unused of ['@aws-sdk/client-s3', '@smithy/node-http-handler', 'dist/storage/s3.js', 'ioredis', 'pg', '@prisma/adapter-pg', 'hash-wasm', 'tus-js-client', 'koffi']) {
      expect(start, unused).not.to.include(unused);
    }
    // The document and its generator (zod-openapi) load on its first request, never at start.
    expect(start).not.to.include('dist/openapi/document.js').and.not.include('zod-openapi');
    expect(names(afterDocs)).to.include('dist/openapi/document.js').and.include('zod-openapi');
  });

  it('when the first JSON body arrives, then the body parser is loaded for it, and that body and a malformed one before it are answered as always', async () => {
    const { atStart, afterDocs, afterJson, json } = await embeddedServer();
    for (const urls of [atStart, afterDocs]) expect(names(urls)).not.to.include('@koa/bodyparser');
    expect(names(afterJson)).to.include('@koa/bodyparser');
    expect(json.bad).to.equal(400);
    expect(json.badCode).to.equal('invalid_json');
    expect(json.good).to.equal(201);
    expect(json.goodBody.account_id).to.be.a('number');
  });

  it("when limits are counted, then only the rate-limiter-flexible classes we use are loaded, not the package's index with every backend", async () => {
    const { atStart, afterJson } = await embeddedServer();
    const limiters = atStart.filter((url) => url.includes('/node_modules/rate-limiter-flexible/')).map((url) => url.slice(url.lastIndexOf('/rate-limiter-flexible/') + 23));
    // The memory limiter counts here (no Redis): the check sees a class that is loaded.
    expect(limiters).to.include('lib/RateLimiterMemory.js');
    for (const unused of ['index.js', 'lib/RateLimiterMongo.js', 'lib/RateLimiterPostgres.js', 'lib/RateLimiterDynamo.js']) expect(limiters, unused).not.to.include(unused);
    expect(afterJson.filter((url) => url.endsWith('/rate-limiter-flexible/index.js'))).to.deep.equal([]);
  });

  if (backends.includes('postgresql')) {
    it('when the database is PostgreSQL, then PGlite is not loaded (nor the AWS SDK, nor ioredis)', async () => {
      const db = await createTestDatabase();
      try {
        const start = names((await modulesLoaded({ DATA_DIR: dataDir, DATABASE_URL: db.url })).atStart);
        expect(start).to.include('@prisma/adapter-pg').and.include('pg');
        for (const unused of ['@electric-sql/pglite', 'pglite-prisma-adapter', '@aws-sdk/client-s3', 'ioredis']) {
          expect(start, unused).not.to.include(unused);
        }
      } finally {
        await db.drop();
      }
    });
  }
});
