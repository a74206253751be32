// A dropstream server built and not listening (src/server.ts, buildServer):
// requests go into the apps' callbacks through light-my-request (Fastify's
// inject), so a suite that needs no socket (no cut connection, no timeout,
// no client address of its own) opens no port. Same database, store and
// settings as test/helpers/server.ts.
import type { OutgoingHttpHeaders } from 'node:http';
import type Koa from 'koa';
import { inject, type InjectOptions } from 'light-my-request';
import { buildServer, type BuiltServer, type ServerOptions } from '../../src/server.js';
import { callWith, injectOrigin, type ApiResponse } from './client.js';
import type { Backend } from './databases.js';
import { PUBLIC_URL, prepareTestServer, ROOMY_PLAN, ROOMY_PLAN_FIELDS, storeFiles } from './server.js';

export interface BuiltTestServer {
  built: BuiltServer;
  /**
   * A made-up origin (http://built-N.test) that stands for the public app:
   * test/helpers/client.ts's call() and the helpers on it (upload, tus,
   * file requests) send URLs on it into the app, as they would to a
   * listening server's URL.
   */
  baseUrl: string;
  /** The baseUrl URL for a path, or for a public link (whose host is PUBLIC_URL). */
  url(pathOrLink: string): string;
  /** A request to the public app as fetch makes it, for a path or a public link (whose host is PUBLIC_URL). */
  fetch(pathOrLink: string, init?: RequestInit): Promise<Response>;
  /** As test/helpers/client.ts's call(): the body parsed when it is JSON; `key` sets the Bearer header. */
  call(pathOrLink: string, init?: RequestInit & { key?: string }): Promise<ApiResponse>;
  /** Calls the admin API; throws unless 2xx. */
  admin(method: string, path: string, body?: unknown): Promise<any>;
  /** A new account on `plan` (default: the roomy test plan), with its API key. */
  account(plan?: string): Promise<{ accountId: number; apiKey: string }>;
  /** Sets (creates or updates) a plan through the admin API. */
  plan(name: string, fields: Record<string, unknown>): Promise<void>;
  dataDir: string;
  /** Every object file in the local store, excluding the temp folder. */
  objects(): Promise<string[]>;
  /** Files left in the store's temp folder. */
  tempFiles(): Promise<string[]>;
  close(): Promise<void>;
}

const NO_BODY = new Set([101, 204, 205, 304]);
let builtCount = 0;

function responseHeaders(raw: OutgoingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, String(one));
  }
  return headers;
}

/** fetch's signature over an app's callback: the URL's path and query reach the app, its host only as the Host header. */
async function injectFetch(app: Koa, url: string, init: RequestInit = {}): Promise<Response> {
  const target = new URL(url, PUBLIC_URL);
  const body = init.body === undefined || init.body === null ? undefined : Buffer.from(await new Response(init.body).arrayBuffer());
  const method = (init.method ?? 'GET').toUpperCase() as InjectOptions['method'];
  const res = await inject(app.callback(), {
    method,
    url: target.pathname + target.search,
    headers: { host: target.host, ...Object.fromEntries(new Headers(init.headers)) },
    ...(body ? { payload: body } : {}),
  });
  const empty = method === 'HEAD' || NO_BODY.has(res.statusCode);
  return new Response(empty ? null : new Uint8Array(res.rawPayload), { status: res.statusCode, headers: responseHeaders(res.headers) });
}

export async function buildTestServer(backend: Backend, env: Record<string, string> = {}, options?: ServerOptions): Promise<BuiltTestServer> {
  const { config, dataDir, logger, cleanUp } = await prepareTestServer(backend, env);
  let built: BuiltServer;
  try {
    built = await buildServer(config, logger, options);
  } catch (err) {
    await cleanUp();
    throw err;
  }
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await injectFetch(built.adminApp, `http://admin.test${path}`, {
      method,
      headers: { Authorization: `Bearer ${built.adminToken}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json: any = await res.json();
    if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  await admin('PUT', `/admin/plans/${ROOMY_PLAN}`, ROOMY_PLAN_FIELDS);
  const baseUrl = `http://built-${++builtCount}.test`;
  const url = (pathOrLink: string) => baseUrl + (pathOrLink.startsWith(PUBLIC_URL) ? pathOrLink.slice(PUBLIC_URL.length) : pathOrLink);
  const fetchApp = (pathOrLink: string, init?: RequestInit) => injectFetch(built.app, pathOrLink, init);
  const forget = injectOrigin(baseUrl, fetchApp);
  return {
    built,
    baseUrl,
    url,
    fetch: fetchApp,
    call: (pathOrLink, init = {}) => callWith(fetchApp, pathOrLink, init),
    admin,
    async account(plan = ROOMY_PLAN) {
      const res = await admin('POST', '/admin/accounts', { plan });
      return { accountId: res.account_id, apiKey: res.api_key };
    },
    async plan(name, fields) {
      await admin('PUT', `/admin/plans/${name}`, fields);
    },
    dataDir,
    ...storeFiles(dataDir),
    async close() {
      forget();
      await built.close();
      await cleanUp();
    },
  };
}
