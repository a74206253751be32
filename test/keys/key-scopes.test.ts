// Keys their owners control (issue 57): scopes on every route, keys no wider
// than the key that made them, expiry, address ranges, the last full key.
import { expect } from 'chai';
import type Router from '@koa/router';
import { SCOPES, type Scope } from '../../src/accounts/scopes.js';
import { apiRoutes, type ApiDeps } from '../../src/api.js';
import { readFileSync } from 'node:fs';
import { DECLARED_SCOPE, routeKey, type ScopedMiddleware } from '../../src/http/scoped.js';
import { call, uploadFile } from '../helpers/client.js';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { testClock } from '../helpers/clock.js';
import { create, head, patch, TUS, uploadUrl } from '../helpers/tus.js';

type Declared = ScopedMiddleware[typeof DECLARED_SCOPE];

/** Every route of the API router as apiRoutes builds it with every optional part on, and what it declares. */
function routes(extra: Partial<ApiDeps> = {}): Array<{ methods: string[]; path: string; declared: Declared[] }> {
  const none = {} as never;
  const deps = { publicUrl: 'http://files.test', bodyRate: { minBytesPerSecond: 1, windowSeconds: 1 }, bodyTimeoutMs: 1000, concurrencySlots: { limitOf: () => 1 } } as unknown as Partial<ApiDeps>;
  const router = apiRoutes({ ...deps, resumable: none, webhooks: none, requests: none, keys: none, ...extra } as ApiDeps) as Router;
  return router.stack.map((layer) => ({
    methods: layer.methods,
    path: String(layer.path),
    declared: layer.stack.filter((fn) => DECLARED_SCOPE in fn).map((fn) => (fn as ScopedMiddleware)[DECLARED_SCOPE]),
  }));
}

const makeKey = (t: BuiltTestServer, key: string, body: Record<string, unknown>) =>
  call(t.url('/api/v1/keys'), { method: 'POST', key, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

const keyOf = async (t: BuiltTestServer, key: string, body: Record<string, unknown>): Promise<string> => {
  const res = await makeKey(t, key, { name: 'test', ...body });
  expect(res.status, res.text).to.equal(201);
  return res.body.key.api_key as string;
};

describe('API keys and their scopes', () => {
  let t: BuiltTestServer;
  let full: string;
  const clock = testClock();
  before(async () => {
    t = await buildTestServer('pglite', {}, { clock });
    ({ apiKey: full } = await t.account());
  });
  after(() => t?.close());

  it('when every route of the API router is walked, then each declares the scope it needs (or why no key reaches it)', () => {
    const all = routes();
    expect(all.length).to.be.above(25);
    const undeclared = all.filter((r) => r.declared.length !== 1).map((r) => `${r.methods.join(',')} ${r.path}`);
    expect(undeclared, 'routes without exactly one declared scope').to.deep.equal([]);
    for (const { declared, path } of all) {
      const [scope] = declared;
      if (typeof scope === 'string') expect(SCOPES, path).to.include(scope);
      else expect(scope!.unscoped, path).to.be.a('string').and.not.empty;
    }
  });

  it('when docs/keys.md\'s table of scopes is read, then it names for every route the scope the route declares, and no route that is not there', () => {
    // Each row: the scope, then `METHOD /path` items (one route) and bare `/prefix` items (every route under it).
    const rows = readFileSync('docs/keys.md', 'utf8').split('\n').filter((line) => /^\| `[a-z]+:[a-z]+` \|/.test(line)).map((line) => {
      const [scope, ...items] = [...line.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      return { scope, exact: items.filter((i) => /^[A-Z]+ \//.test(i)).map((i) => routeKey(i.split(' ')[0]!, i.split(' ')[1]!)), under: items.filter((i) => i.startsWith('/')) };
    });
    expect(rows.map((r) => r.scope)).to.have.members([...SCOPES]);
    const declared = new Map<string, Declared>();
    for (const { methods, path, declared: [scope] } of routes({ audit: {} as never })) {
      for (const method of methods) if (method !== 'HEAD' && typeof scope === 'string') declared.set(routeKey(method, path.replace(/^\/api\/v1/, '')), scope);
    }
    for (const [route, scope] of declared) {
      const path = route.split(' ')[1]!;
      const row = rows.find((r) => r.exact.includes(route)) ?? rows.find((r) => r.under.some((prefix) => path === prefix || path.startsWith(`${prefix}/`)));
      expect(row?.scope, `${route} in docs/keys.md`).to.equal(scope);
    }
    for (const { scope, exact } of rows) for (const route of exact) expect(declared.get(route), `docs/keys.md's ${route}`).to.equal(scope);
  });

  it('when a key holding every scope but the one a route needs calls it, then every route answers 403 insufficient_scope naming that scope', async () => {
    const without = new Map<Scope, string>();
    for (const scope of SCOPES) without.set(scope, await keyOf(t, full, { scopes: SCOPES.filter((s) => s !== scope) }));
    let checked = 0;
    for (const { methods, path, declared } of routes()) {
      const scope = declared[0];
      if (typeof scope !== 'string') continue;
      const url = t.url(path.replace(':linkId', 'x').replace(':id', '1'));
      for (const method of methods) {
        const res = await call(url, { method, key: without.get(scope)!, headers: { ...TUS, 'Content-Type': 'application/json' } });
        expect(res.status, `${method} ${path}`).to.equal(403);
        expect(res.headers.get('www-authenticate'), `${method} ${path}`).to.equal(`Bearer error="insufficient_scope", scope="${scope}"`);
        if (method !== 'HEAD') expect(res.body.error, `${method} ${path}`).to.deep.include({ code: 'insufficient_scope' });
        if (method !== 'HEAD') expect(res.body.error.message).to.include(scope);
        checked++;
      }
    }
    expect(checked).to.be.above(25);
  });

  it('when a key holds files:write only, then it uploads by plain POST and by tus, and cannot list, read or delete', async () => {
    const uploader = await keyOf(t, full, { scopes: ['files:write'] });
    const plain = await uploadFile(t.baseUrl, uploader, 'plain.txt', 'plain bytes');
    expect(plain.status, plain.text).to.equal(201);
    const created = await create(t.baseUrl, uploader, { length: 6, filename: 'tus.bin' });
    expect(created.status).to.equal(201);
    const url = uploadUrl(t.baseUrl, created);
    expect((await patch(url, uploader, 0, Buffer.from('abc'))).status).to.equal(204);
    expect((await head(url, uploader)).headers.get('upload-offset')).to.equal('3');
    expect((await patch(url, uploader, 3, Buffer.from('def'))).status).to.equal(204);
    const id = plain.body.file_id as number;
    for (const [method, path] of [['GET', '/api/v1/files'], ['GET', `/api/v1/files/${id}`], ['DELETE', `/api/v1/files/${id}`], ['GET', `/api/v1/files/${id}/links`]] as const) {
      const res = await call(t.url(path), { method, key: uploader });
      expect(res.status, `${method} ${path}`).to.equal(403);
      expect(res.body.error.code).to.equal('insufficient_scope');
    }
    // The files are there, for a key that may read them.
    const listed = await call(t.url('/api/v1/files'), { key: full });
    expect(listed.body.files.map((f: { filename: string }) => f.filename)).to.include.members(['plain.txt', 'tus.bin']);
  });

  it('when a key makes a key, then it cannot give it a scope it lacks, a full key, a longer life or wider addresses', async () => {
    const maker = await keyOf(t, full, { scopes: ['keys:write', 'files:write'], expires_in: 3600, allowed_cidrs: ['127.0.0.0/8'] });
    const wider = await makeKey(t, maker, { name: 'wider', scopes: ['files:write', 'files:delete'] });
    expect(wider.status).to.equal(403);
    expect(wider.body.error.code).to.equal('insufficient_scope');
    expect(wider.body.error.message).to.include('files:delete');
    expect((await makeKey(t, maker, { name: 'full', scopes: ['*'] })).body.error.code).to.equal('insufficient_scope');
    expect((await makeKey(t, maker, { name: 'longer', scopes: ['files:write'], expires_in: 7200 })).body.error.code).to.equal('key_exceeds_creator');
    expect((await makeKey(t, maker, { name: 'elsewhere', scopes: ['files:write'], allowed_cidrs: ['10.0.0.0/8'] })).body.error.code).to.equal('key_exceeds_creator');
    // As narrow or narrower: made, and it inherits the maker's expiry and ranges.
    const narrow = await makeKey(t, maker, { name: 'narrow', scopes: ['files:write'], allowed_cidrs: ['127.0.0.1/32'] });
    expect(narrow.status, narrow.text).to.equal(201);
    expect(narrow.body.key).to.deep.include({ name: 'narrow', scopes: ['files:write'], allowed_cidrs: ['127.0.0.1/32'] });
    expect(narrow.body.key.expires_at).to.be.a('string');
  });

  it('when keys are listed, then each shows its name, scopes, prefix and dates but never its secret, and the caller\'s own is marked', async () => {
    const { apiKey: owner } = await t.account();
    const made = await makeKey(t, owner, { name: 'CI uploads', scopes: ['files:write'], expires_in: 600 });
    const listed = await call(t.url('/api/v1/keys'), { key: owner });
    expect(listed.status).to.equal(200);
    expect(listed.body.keys).to.have.length(2);
    const [ci, operator] = listed.body.keys;
    expect(ci).to.deep.include({ key_id: made.body.key.key_id, name: 'CI uploads', scopes: ['files:write'], prefix: made.body.key.api_key.slice(0, 12), current: false, allowed_cidrs: null });
    expect(Object.keys(ci).sort()).to.deep.equal(['allowed_cidrs', 'created_at', 'current', 'expires_at', 'key_id', 'last_used_at', 'name', 'prefix', 'scopes']);
    expect(operator).to.deep.include({ name: null, scopes: ['*'], current: true, expires_at: null });
    expect(listed.text).to.not.include(made.body.key.api_key);
  });

  it('when a key expires, then it is refused with 401 from that second on', async () => {
    const brief = await keyOf(t, full, { scopes: ['stats:read'], expires_in: 1 });
    expect((await call(t.url('/api/v1/stats'), { key: brief })).status).to.equal(200);
    clock.advance(1000);
    expect((await call(t.url('/api/v1/stats'), { key: brief })).status).to.equal(401);
  });

  it('when a key is used from outside its allowed_cidrs, then 403 address_not_allowed; from inside, it works', async () => {
    const outside = await keyOf(t, full, { scopes: ['stats:read'], allowed_cidrs: ['192.0.2.0/24', '2001:db8::/32'] });
    const res = await call(t.url('/api/v1/stats'), { key: outside });
    expect(res.status).to.equal(403);
    expect(res.body.error.code).to.equal('address_not_allowed');
    const inside = await keyOf(t, full, { scopes: ['stats:read'], allowed_cidrs: ['127.0.0.0/8', '::1/128'] });
    expect((await call(t.url('/api/v1/stats'), { key: inside })).status).to.equal(200);
  });

  it('when a key is revoked, then it is refused with 401 and gone from the list; the last full key without an expiry cannot be revoked (409 last_full_key)', async () => {
    const { apiKey: owner } = await t.account();
    const own = (await call(t.url('/api/v1/keys'), { key: owner })).body.keys[0].key_id as string;
    const last = await call(t.url(`/api/v1/keys/${own}`), { method: 'DELETE', key: owner });
    expect(last.status).to.equal(409);
    expect(last.body.error.code).to.equal('last_full_key');
    expect(last.body.error.message).to.include('dropstream keys rotate');
    // A narrower key cannot revoke a wider one.
    const manager = await keyOf(t, owner, { scopes: ['keys:write'] });
    expect((await call(t.url(`/api/v1/keys/${own}`), { method: 'DELETE', key: manager })).body.error.code).to.equal('insufficient_scope');
    // With a second full key, the first goes.
    const second = await keyOf(t, owner, { scopes: ['*'] });
    expect((await call(t.url(`/api/v1/keys/${own}`), { method: 'DELETE', key: second })).status).to.equal(200);
    expect((await call(t.url('/api/v1/stats'), { key: owner })).status).to.equal(401);
    const keys = (await call(t.url('/api/v1/keys'), { key: second })).body.keys.map((k: { key_id: string }) => k.key_id);
    expect(keys).to.not.include(own);
    expect((await call(t.url(`/api/v1/keys/${own}`), { method: 'DELETE', key: second })).body.error.code).to.equal('key_not_found');
  });

  it('when a new key\'s body is wrong (unknown scope, "*" with others, no name, an unknown field, a bad range), then 400 invalid_key_request', async () => {
    for (const body of [
      { name: 'x', scopes: ['files:everything'] },
      { name: 'x', scopes: ['*', 'files:read'] },
      { scopes: ['files:read'] },
      { name: ' ', scopes: ['files:read'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['files:read'], admin: true },
      { name: 'x', scopes: ['files:read'], allowed_cidrs: ['10.0.0.0/33'] },
      { name: 'x', scopes: ['files:read'], expires_in: 0 },
    ]) {
      const res = await makeKey(t, full, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_key_request');
    }
  });
});
