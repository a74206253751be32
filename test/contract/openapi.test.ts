import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { expect } from 'chai';
import type Router from '@koa/router';
import { openApiDocument, type Operation, type Ref, type Response, type Schema } from '../../src/openapi/document.js';
import { API_PREFIX, apiRoutes, type ApiDeps } from '../../src/api.js';
import { DECLARED_SCOPE, declaredScopes, type ScopedMiddleware } from '../../src/http/scoped.js';
import { backends } from '../helpers/databases.js';
import { call, upload, uploadFile, type ApiResponse } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { PUBLIC_URL, type TestServer } from '../helpers/server.js';
import { create, head, patch, terminate, uploadUrl } from '../helpers/tus.js';
import { sharedServer } from '../helpers/shared.js';
import { multipartBody, multipartType } from '../helpers/multipart.js';

/** The API router as apiRoutes builds it with every optional part on (nothing it is given is used before a request). */
function apiRouter(): Router {
  const none = {} as never;
  const deps = { publicUrl: PUBLIC_URL, bodyRate: { minBytesPerSecond: 1, windowSeconds: 1 }, bodyTimeoutMs: 1000, concurrencySlots: { limitOf: () => 1 } } as unknown as Partial<ApiDeps>;
  return apiRoutes({ ...deps, resumable: none, direct: none, webhooks: none, requests: none, keys: none, audit: none } as ApiDeps) as Router;
}
const router = apiRouter();
const scopes = declaredScopes(router, API_PREFIX);
const doc = openApiDocument(PUBLIC_URL, scopes);

/**
 * What the route that answers `method path` declares (need(scope) or
 * unscoped(why)), found as the router finds it: the first layer whose path
 * matches and that has the method (a document path's parameters filled in).
 */
function declaredFor(method: string, path: string): ScopedMiddleware[typeof DECLARED_SCOPE] | undefined {
  const url = API_PREFIX + path.replace(/\{[^}]+\}/g, 'p1');
  const layer = router.stack.find((l) => l.match(url) && l.methods.includes(method.toUpperCase()));
  return (layer?.stack.find((fn) => DECLARED_SCOPE in fn) as ScopedMiddleware | undefined)?.[DECLARED_SCOPE];
}
const DOC_ID = 'https://dropstream.test/openapi.json';
const METHODS = ['get', 'post', 'delete', 'head', 'options', 'patch'] as const;
/** Operations outside the key-protected API. */
const PUBLIC_PATHS = ['/download/{token}', '/healthz', '/readyz', '/app', '/docs', '/openapi.json', '/'];
/** A file request's routes (issue 45): public too, with the link's guard (a request's password is Basic, as a link's). */
const REQUEST_LINK_PATHS = ['/r/{token}', '/r/{token}/files', '/r/{token}/uploads', '/r/{token}/uploads/{upload_id}'];

const pointerPart = (part: string) => encodeURIComponent(part.replace(/~/g, '~0').replace(/\//g, '~1'));

/** The value at a JSON pointer ("/a/b") of the document. */
function at(pointer: string): any {
  let node: any = doc;
  for (const part of pointer.split('/').slice(1)) node = node?.[decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~')];
  return node;
}

/** Follows one OpenAPI `$ref` (response or header objects), returning the object and where it lives. */
function follow<T>(node: T | Ref, pointer: string): { node: T; pointer: string } {
  if (node && typeof node === 'object' && '$ref' in node) {
    const target = node.$ref.slice(1);
    return { node: at(target) as T, pointer: target };
  }
  return { node: node as T, pointer };
}

function operations(): Array<{ path: string; method: string; op: Operation }> {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => (item[method] ? [{ path, method, op: item[method] as Operation }] : [])),
  );
}

function newAjv() {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  // ajv-formats is CommonJS; under NodeNext its function is typed as `.default` (also there at run time).
  formats.default(ajv);
  // The document's own fields are not JSON Schema keywords.
  ajv.addVocabulary(['openapi', 'info', 'servers', 'tags', 'paths', 'webhooks', 'components']);
  ajv.addSchema({ ...doc, $id: DOC_ID });
  return ajv;
}
const ajv = newAjv();

/** A validator for the JSON schema at `pointer` in the document; its `$ref`s resolve inside the document. */
const schemaAt = (pointer: string) => ajv.getSchema(`${DOC_ID}#${pointer}`) ?? ajv.compile({ $ref: `${DOC_ID}#${pointer}` });

function documentedResponse(path: string, method: string, status: number) {
  const base = `/paths/${pointerPart(path)}/${method}/responses/${status}`;
  const raw = at(base) as Response | Ref | undefined;
  expect(raw, `${method.toUpperCase()} ${path} documents ${status}`).to.not.equal(undefined);
  return follow<Response>(raw!, base);
}

function expectValid(validate: ReturnType<typeof schemaAt>, value: unknown, what: string) {
  const valid = validate(value);
  expect(valid, `${what}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(value)}`).to.equal(true);
}

/** The response's status is documented for the operation; its JSON body and every documented header match the document. */
function expectDocumented(res: ApiResponse, path: string, method: string) {
  const { node, pointer } = documentedResponse(path, method, res.status);
  const what = `${method.toUpperCase()} ${path} ${res.status}`;
  if (node.content?.['application/json']) {
    expect(res.headers.get('content-type'), what).to.match(/^application\/json/);
    expectValid(schemaAt(`${pointer}/content/application~1json/schema`), res.body, what);
  }
  for (const [name, ref] of Object.entries(node.headers ?? {})) {
    const header = follow<{ schema: Schema }>(ref, '');
    const raw = res.headers.get(name);
    expect(raw, `${what} carries ${name}`).to.be.a('string');
    const value = header.node.schema.type === 'integer' && /^-?\d+$/.test(raw!) ? Number(raw) : raw;
    expectValid(schemaAt(`${header.pointer}/schema`), value, `${what} header ${name}`);
  }
}

describe('OpenAPI document', () => {
  it('when built, then it is OpenAPI 3.1.0 with the API under /api/v1 of the origin it is served from', () => {
    expect(doc.openapi).to.equal('3.1.0');
    expect(doc.servers.map((s) => s.url)).to.deep.equal(['/api/v1']);
  });

  it('when the operations are listed, then every one has an operationId and no two share one', () => {
    const ids = operations().map(({ op }) => op.operationId);
    expect(operations()).to.have.length.greaterThan(10);
    for (const id of ids) expect(id).to.match(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids).size).to.equal(ids.length);
  });

  it('when an /api/v1 operation is documented, then it requires the bearer key with the scope its route declares, and documents 401, 403, 429 and 500', () => {
    expect(doc.components.securitySchemes.bearerAuth).to.include({ type: 'http', scheme: 'bearer' });
    const api = operations().filter(({ path }) => !PUBLIC_PATHS.includes(path) && !REQUEST_LINK_PATHS.includes(path));
    expect(api.map(({ path, method }) => `${method} ${path}`).sort()).to.deep.equal(
      [
        'delete /files/{file_id}', 'delete /files/{file_id}/links/{link_id}', 'delete /uploads/{upload_id}', 'get /files', 'get /files/{file_id}',
        'get /files/{file_id}/links', 'get /stats', 'get /uploads', 'get /uploads/{upload_id}', 'head /uploads/{upload_id}', 'options /uploads', 'patch /uploads/{upload_id}',
        'post /files/upload', 'post /files/{file_id}/links', 'post /uploads',
        'delete /webhooks/{webhook_id}', 'get /webhooks', 'get /webhooks/{webhook_id}/deliveries', 'post /webhooks', 'post /webhooks/{webhook_id}/rotate-secret',
        'get /requests', 'post /requests', 'get /requests/{request_id}', 'delete /requests/{request_id}',
        'get /keys', 'post /keys', 'delete /keys/{key_id}', 'get /audit',
        'get /uploads/direct', 'post /uploads/direct', 'get /uploads/direct/{upload_id}', 'delete /uploads/direct/{upload_id}',
        'post /uploads/direct/{upload_id}/parts', 'post /uploads/direct/{upload_id}/complete',
      ].sort(),
    );
    for (const { path, method, op } of api) {
      const declared = declaredFor(method, path);
      expect(declared, `${method} ${path}: the route's scope`).to.be.a('string');
      expect(op.security, `${method} ${path}`).to.deep.equal([{ bearerAuth: [declared] }]);
      for (const status of ['401', '403', '429', '500']) expect(op.responses, `${method} ${path}`).to.have.property(status);
    }
  });

  it('when a route declares another scope, then the document names that one; when a routed feature has no route for an operation, then the document is not built', () => {
    const moved = openApiDocument(PUBLIC_URL, new Map(scopes).set('GET /files', 'stats:read'));
    expect(moved.paths['/files']!.get!.security).to.deep.equal([{ bearerAuth: ['stats:read'] }]);
    const missing = new Map(scopes);
    missing.delete('DELETE /files/{}');
    expect(() => openApiDocument(PUBLIC_URL, missing)).to.throw('DELETE /files/{file_id}');
    // A feature this server does not run has no routes to read: its operations keep no scope.
    const withoutTus = new Map([...scopes].filter(([key]) => !key.split(' ')[1]!.startsWith('/uploads')));
    expect(openApiDocument(PUBLIC_URL, withoutTus).paths['/uploads']!.post!.security).to.deep.equal([{ bearerAuth: [] }]);
  });

  it('when a public operation is documented, then it needs no key, and only a download has a 401 (a link\'s password, Basic)', () => {
    const open = operations().filter(({ path }) => PUBLIC_PATHS.includes(path));
    expect(open).to.have.length(8);
    for (const { path, method, op } of open) {
      expect(op.security, `${method} ${path}`).to.deep.equal([]);
      if (path !== '/download/{token}') expect(op.responses, `${method} ${path}`).to.not.have.property('401');
      else expect(JSON.stringify(op.responses['401']), `${method} ${path}`).to.include('BasicChallenge').and.not.include('missing_api_key');
    }
  });

  it('when a file request\'s link operation is documented, then it needs no key and documents the link\'s 401 (Basic), 404, 410 and 429', () => {
    const open = operations().filter(({ path }) => REQUEST_LINK_PATHS.includes(path));
    // The page; the plain upload; tus OPTIONS, POST, HEAD, PATCH, DELETE.
    expect(open).to.have.length(7);
    for (const { path, method, op } of open) {
      expect(op.security, `${method} ${path}`).to.deep.equal([]);
      expect(JSON.stringify(op.responses['401']), `${method} ${path}`).to.include('BasicChallenge');
      for (const status of ['404', '410', '429']) expect(op.responses, `${method} ${path}`).to.have.property(status);
    }
  });

  it('when a path lives outside /api/v1, then its servers name the root of the origin it is served from', () => {
    for (const path of ['/download/{token}', '/healthz', '/readyz', '/app', '/docs', '/', ...REQUEST_LINK_PATHS]) {
      expect(doc.paths[path]?.servers, path).to.deep.equal([{ url: '/', description: 'Outside the versioned API' }]);
    }
    expect(doc.paths['/openapi.json']?.servers).to.equal(undefined);
  });

  it('when every $ref is followed, then it lands on something in the document', () => {
    const refs: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === 'object') {
        for (const [key, value] of Object.entries(node)) key === '$ref' ? refs.push(value as string) : walk(value);
      }
    };
    walk(doc);
    expect(refs.length).to.be.greaterThan(50);
    for (const ref of refs) {
      expect(ref, ref).to.match(/^#\//);
      expect(at(ref.slice(1)), ref).to.be.an('object');
    }
  });

  it('when an operation documents an error with a body, then the body is the one Error schema', () => {
    let checked = 0;
    for (const { path, method, op } of operations()) {
      for (const [status, raw] of Object.entries(op.responses)) {
        const { node } = follow<Response>(raw, '');
        // /readyz answers 503 with its own readiness body, naming what is down.
        if (Number(status) < 400 || !node.content || path === '/readyz') continue;
        expect(node.content, `${method} ${path} ${status}`).to.deep.equal({ 'application/json': { schema: { $ref: '#/components/schemas/Error' } } });
        checked += 1;
      }
    }
    expect(checked).to.be.greaterThan(25);
  });

  it('when the upload documents its errors, then 400, 403, 408 and 503 are there and 413 is not', () => {
    const responses = doc.paths['/files/upload']!.post!.responses;
    expect(Object.keys(responses).sort()).to.deep.equal(['201', '400', '401', '403', '408', '429', '500', '503']);
  });

  it('when the Error schema meets success true, an unknown field or a missing message, then it refuses', () => {
    const validate = schemaAt('/components/schemas/Error');
    expect(validate({ success: false, error: { code: 'not_found', message: 'No such route' } })).to.equal(true);
    expect(validate({ success: true, error: { code: 'not_found', message: 'x' } })).to.equal(false);
    expect(validate({ success: false, error: { code: 'not_found', message: 'x' }, extra: 1 })).to.equal(false);
    expect(validate({ success: false, error: { code: 'not_found' } })).to.equal(false);
  });

  it('when an upload response has a field more than the spec\'s (expires_at too), or a fractional size, then the 201 schema refuses it', () => {
    const validate = schemaAt('/paths/~1files~1upload/post/responses/201/content/application~1json/schema');
    const good = { success: true, file_id: 1, public_link: `${PUBLIC_URL}/download/abcdefghijklmnopqrstuv`, size: 3, filename: 'a.txt' };
    expect(validate(good)).to.equal(true);
    expect(validate({ ...good, expires_at: null })).to.equal(false);
    expect(validate({ ...good, expires_at: '2026-12-01 08:00:00' })).to.equal(false);
    const { filename: _, ...withoutFilename } = good;
    expect(validate(withoutFilename)).to.equal(false);
    expect(validate({ ...good, upload_date: '2026-01-01 00:00:00' })).to.equal(false);
    expect(validate({ ...good, size: 1.5 })).to.equal(false);
    expect(validate({ ...good, public_link: 'http://elsewhere.test/download/abc' })).to.equal(false);
  });

  it('when a file has an ISO date with a T or a zone, then the File schema refuses it', () => {
    const validate = schemaAt('/components/schemas/File');
    const file = { file_id: 1, filename: 'a', size: 0, download_count: 0, public_link: `${PUBLIC_URL}/download/abc`, upload_date: '2026-11-21 23:24:04', expires_at: null, request_id: null };
    expect(validate(file)).to.equal(true);
    expect(validate({ ...file, upload_date: '2026-11-21T23:24:04' })).to.equal(false);
    expect(validate({ ...file, upload_date: '2026-11-21 23:24:04Z' })).to.equal(false);
    expect(validate({ ...file, expires_at: '2026-11-22 23:24:04' })).to.equal(true);
    expect(validate({ ...file, expires_at: '2026-11-22T23:24:04Z' })).to.equal(false);
  });

  it('when the list parameters are documented, then page defaults to 1 and limit to 20, at most 100', () => {
    expect(doc.components.parameters.Page!.schema).to.include({ type: 'integer', minimum: 1, default: 1 });
    expect(doc.components.parameters.Limit!.schema).to.include({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
  });
});

for (const backend of backends) {
  describe(`OpenAPI document against the running API (${backend})`, () => {
    let t: TestServer;
    let key: string;
    let fileId: number;
    before(async () => {
      t = await sharedServer(backend);
      ({ apiKey: key } = await t.account());
    });

    it('when the docs are opened from another origin than PUBLIC_URL, then the request "Try it out" builds reaches this server', async () => {
      // t.server.url is http://127.0.0.1:<port>; PUBLIC_URL is http://files.test, which does not resolve.
      const documentUrl = t.url('/api/v1/openapi.json');
      const served = (await call(documentUrl)).body;
      /**
       * What Swagger UI (swagger-client's buildOas3UrlWithContext) does: the
       * path's or the document's first server, resolved against the URL the
       * document was loaded from, without a trailing slash, then the path.
       */
      const tryItOut = (path: string) => {
        const server = (served.paths[path].servers ?? served.servers)[0].url as string;
        return new URL(server, documentUrl).href.replace(/\/$/, '') + path;
      };
      expect(tryItOut('/stats')).to.equal(t.url('/api/v1/stats'));
      expect((await call(tryItOut('/stats'), { key })).status).to.equal(200);
      expect(tryItOut('/healthz')).to.equal(t.url('/healthz'));
      expect((await call(tryItOut('/healthz'))).status).to.equal(200);
    });

    it('when a resumable upload is created, written, asked about, read and terminated, then every answer matches the document', async () => {
      // An account of its own: the tests below count the files of `key`.
      const { apiKey: key } = await t.account();
      const options = await call(`${t.server.url}/api/v1/uploads`, { method: 'OPTIONS', key });
      expectDocumented(options, '/uploads', 'options');
      const created = await create(t.server.url, key, { length: 10 });
      expectDocumented(created, '/uploads', 'post');
      const url = uploadUrl(t.server.url, created);
      const path = '/uploads/{upload_id}';
      expectDocumented(await patch(url, key, 0, Buffer.from('12345')), path, 'patch');
      const status = await head(url, key);
      expect(status.status).to.equal(200);
      expectDocumented(status, path, 'head');
      const conflict = await patch(url, key, 0, Buffer.from('12345'));
      expect(conflict.status).to.equal(409);
      expectDocumented(conflict, path, 'patch');
      const wrongVersion = await call(url, { method: 'PATCH', key, headers: { 'Tus-Resumable': '0.2.2' } });
      expect(wrongVersion.status).to.equal(412);
      expectDocumented(wrongVersion, path, 'patch');
      expectDocumented(await call(url, { key }), path, 'get');
      expectDocumented(await terminate(url, key), path, 'delete');
      const gone = await patch(url, key, 5, Buffer.from('67890'));
      expect(gone.status).to.equal(404);
      expectDocumented(gone, path, 'patch');
      const finished = await create(t.server.url, key, { length: 3, body: Buffer.from('abc') });
      expectDocumented(finished, '/uploads', 'post');
      const file = await call(uploadUrl(t.server.url, finished), { key });
      expect(file.body.file.size).to.equal(3);
      expectDocumented(file, path, 'get');
    });

    it('when a file is uploaded, then the 201 matches the document', async () => {
      const res = await uploadFile(t.server.url, key, 'doc.txt', 'documented');
      expect(res.status).to.equal(201);
      expectDocumented(res, '/files/upload', 'post');
      fileId = res.body.file_id;
    });

    it('when files are listed, then the 200 matches the document', async () => {
      const res = await call(t.url('/api/v1/files?limit=5'), { key });
      expect(res.status).to.equal(200);
      expect(res.body.files).to.have.length(1);
      expectDocumented(res, '/files', 'get');
    });

    it('when a file\'s links are listed, made, refused and revoked, then every answer matches the document', async () => {
      const { apiKey: own } = await t.account();
      const id = (await uploadFile(t.server.url, own, 'linked.txt', 'linked')).body.file_id;
      const path = '/files/{file_id}/links';
      const listed = await call(t.url(`/api/v1/files/${id}/links`), { key: own });
      expect(listed.status).to.equal(200);
      expectDocumented(listed, path, 'get');
      const post = (body: string) => call(t.url(`/api/v1/files/${id}/links`), { method: 'POST', key: own, headers: { 'Content-Type': 'application/json' }, body });
      const made = await post(JSON.stringify({ expires_in: 60, max_downloads: 1, password: 'pw' }));
      expect(made.status).to.equal(201);
      expectDocumented(made, path, 'post');
      const refused = await post('{"max_downloads":0}');
      expect(refused.status).to.equal(400);
      expectDocumented(refused, path, 'post');
      const protectedLink = await call(t.url(made.body.link.public_link));
      expect(protectedLink.status).to.equal(401);
      expectDocumented(protectedLink, '/download/{token}', 'get');
      const revoked = await call(t.url(`/api/v1/files/${id}/links/${made.body.link.link_id}`), { method: 'DELETE', key: own });
      expect(revoked.status).to.equal(200);
      expectDocumented(revoked, '/files/{file_id}/links/{link_id}', 'delete');
      const again = await call(t.url(`/api/v1/files/${id}/links/${made.body.link.link_id}`), { method: 'DELETE', key: own });
      expect(again.status).to.equal(404);
      expectDocumented(again, '/files/{file_id}/links/{link_id}', 'delete');
      const primary = (await call(t.url(`/api/v1/files/${id}/links`), { key: own })).body.links[0];
      const rotated = await call(t.url(`/api/v1/files/${id}/links/${primary.link_id}`), { method: 'DELETE', key: own });
      expect(rotated.body.link.primary).to.equal(true);
      expectDocumented(rotated, '/files/{file_id}/links/{link_id}', 'delete');
      const limited = (await call(t.url(`/api/v1/files/${id}/links`), { method: 'POST', key: own, headers: { 'Content-Type': 'application/json' }, body: '{"max_downloads":1}' })).body.link;
      await (await fetch(t.url(limited.public_link))).arrayBuffer();
      const exhausted = await call(t.url(limited.public_link));
      expect(exhausted.status).to.equal(410);
      expectDocumented(exhausted, '/download/{token}', 'get');
    });

    it('when a file request is made, refused, listed, got, sent a file, refused through its link and closed, then every answer matches the document', async () => {
      const { apiKey: own } = await t.account();
      const post = (body: string) => call(t.url('/api/v1/requests'), { method: 'POST', key: own, headers: { 'Content-Type': 'application/json' }, body });
      const made = await post(JSON.stringify({ title: 'Docs', max_files: 1 }));
      expect(made.status).to.equal(201);
      expectDocumented(made, '/requests', 'post');
      expectDocumented(await post('{"max_files":0}'), '/requests', 'post');
      expectDocumented(await call(t.url('/api/v1/requests'), { key: own }), '/requests', 'get');
      const path = new URL(made.body.request.upload_link).pathname;
      const send = () => call(t.url(`${path}/files`), { method: 'POST', headers: { 'Content-Type': multipartType() }, body: new Uint8Array(multipartBody([{ name: 'file', filename: 'r.txt', content: 'request' }])) });
      const sent = await send();
      expect(sent.status).to.equal(201);
      expectDocumented(sent, '/r/{token}/files', 'post');
      const full = await send();
      expect(full.status).to.equal(410);
      expectDocumented(full, '/r/{token}/files', 'post');
      const id = made.body.request.request_id;
      const got = await call(t.url(`/api/v1/requests/${id}`), { key: own });
      expect(got.body.files).to.have.length(1);
      expectDocumented(got, '/requests/{request_id}', 'get');
      expectDocumented(await call(t.url(`/api/v1/requests/${id}`), { method: 'DELETE', key: own }), '/requests/{request_id}', 'delete');
      const closed = await send();
      expect(closed.status).to.equal(404);
      expectDocumented(closed, '/r/{token}/files', 'post');
      expectDocumented(await call(t.url(`/api/v1/requests/${id}`), { key: own }), '/requests/{request_id}', 'get');
    });

    it('when webhooks are made, refused, listed, rotated, asked for deliveries and removed, then every answer matches the document, and so do the events written', async () => {
      const { apiKey: own } = await t.account();
      const post = (body: string) => call(t.url('/api/v1/webhooks'), { method: 'POST', key: own, headers: { 'Content-Type': 'application/json' }, body });
      const made = await post(JSON.stringify({ url: 'https://example.com/hook' }));
      expect(made.status).to.equal(201);
      expectDocumented(made, '/webhooks', 'post');
      const refused = await post('{"url":"ftp://example.com"}');
      expect(refused.status).to.equal(400);
      expectDocumented(refused, '/webhooks', 'post');
      const listed = await call(t.url('/api/v1/webhooks'), { key: own });
      expectDocumented(listed, '/webhooks', 'get');
      const id = made.body.webhook.webhook_id;
      expectDocumented(await call(t.url(`/api/v1/webhooks/${id}/rotate-secret`), { method: 'POST', key: own }), '/webhooks/{webhook_id}/rotate-secret', 'post');
      const file = (await upload(t.server.url, own, [{ name: 'max_downloads', content: '1' }, { name: 'file', filename: 'evented.txt', content: 'events' }])).body;
      await (await fetch(t.url(file.public_link))).arrayBuffer();
      // A download is counted (and its events written) as its response finishes, which the client can see
      // after its last byte: a delete sent first leaves no file to count (seen once on a loaded machine).
      await eventually(() => call(t.url(`/api/v1/files/${file.file_id}`), { key: own }), (res) => res.body.file?.download_count === 1);
      expect((await call(t.url(`/api/v1/files/${file.file_id}`), { method: 'DELETE', key: own })).status).to.equal(200);
      const deliveries = await eventually(() => call(t.url(`/api/v1/webhooks/${id}/deliveries`), { key: own }), (res) => res.body.deliveries.length >= 4);
      expectDocumented(deliveries, '/webhooks/{webhook_id}/deliveries', 'get');
      const bodies = await t.server.db.prisma.webhookMessage.findMany({ where: { endpointId: id }, select: { type: true, body: true } });
      expect(bodies.map((b) => b.type).sort()).to.deep.equal(['file.deleted', 'file.downloaded', 'file.uploaded', 'link.exhausted']);
      for (const { type, body } of bodies) {
        const schema = (at(`/webhooks/${type}/post/requestBody/content/application~1json/schema`) as Ref).$ref.split('#')[1]!;
        expectValid(schemaAt(schema), JSON.parse(body), `the ${type} event`);
      }
      const removed = await call(t.url(`/api/v1/webhooks/${id}`), { method: 'DELETE', key: own });
      expectDocumented(removed, '/webhooks/{webhook_id}', 'delete');
      const gone = await call(t.url(`/api/v1/webhooks/${id}`), { method: 'DELETE', key: own });
      expect(gone.status).to.equal(404);
      expectDocumented(gone, '/webhooks/{webhook_id}', 'delete');
    });

    it('when one file is read, then the 200 matches the document', async () => {
      const res = await call(t.url(`/api/v1/files/${fileId}`), { key });
      expect(res.status).to.equal(200);
      expectDocumented(res, '/files/{file_id}', 'get');
    });

    it('when the statistics are read, then the 200 matches the document', async () => {
      const res = await call(t.url('/api/v1/stats'), { key });
      expect(res.status).to.equal(200);
      expectDocumented(res, '/stats', 'get');
    });

    it('when the file is downloaded whole and in part, then 200 and 206 carry the documented headers', async () => {
      const info = await call(t.url(`/api/v1/files/${fileId}`), { key });
      const whole = await call(t.url(info.body.file.public_link));
      expect(whole.status).to.equal(200);
      expectDocumented(whole, '/download/{token}', 'get');
      const part = await call(t.url(info.body.file.public_link), { headers: { Range: 'bytes=0-3' } });
      expect(part.status).to.equal(206);
      expect(part.text).to.equal('docu');
      expectDocumented(part, '/download/{token}', 'get');
    });

    it('when the range is outside the file, then the 416 matches the document', async () => {
      const info = await call(t.url(`/api/v1/files/${fileId}`), { key });
      const res = await call(t.url(info.body.file.public_link), { headers: { Range: 'bytes=500-600' } });
      expect(res.status).to.equal(416);
      expectDocumented(res, '/download/{token}', 'get');
    });

    it('when the file is deleted, then the 200 matches the document', async () => {
      const res = await call(t.url(`/api/v1/files/${fileId}`), { method: 'DELETE', key });
      expect(res.status).to.equal(200);
      expectDocumented(res, '/files/{file_id}', 'delete');
    });

    it('when the file is gone, then the 404s of the API and of the link match the document', async () => {
      const res = await call(t.url(`/api/v1/files/${fileId}`), { key });
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal('file_not_found');
      expectDocumented(res, '/files/{file_id}', 'get');
      const link = await call(t.url('/download/AAAAAAAAAAAAAAAAAAAAAA'));
      expect(link.status).to.equal(404);
      expectDocumented(link, '/download/{token}', 'get');
    });

    it('when page is not a positive integer, then the 400 matches the document', async () => {
      const res = await call(t.url('/api/v1/files?page=0'), { key });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_parameter');
      expectDocumented(res, '/files', 'get');
    });

    it('when the file id is not a positive integer, then the 400 matches the document', async () => {
      const res = await call(t.url('/api/v1/files/abc'), { method: 'DELETE', key });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_file_id');
      expectDocumented(res, '/files/{file_id}', 'delete');
    });

    it('when no key is sent, then the 401 and its WWW-Authenticate match the document', async () => {
      const res = await call(t.url('/api/v1/stats'));
      expect(res.status).to.equal(401);
      expect(res.body.error.code).to.equal('missing_api_key');
      expectDocumented(res, '/stats', 'get');
    });

    it('when the plan has no API access, then the 403 matches the document', async () => {
      const { apiKey } = await t.account('free');
      const res = await call(t.url('/api/v1/files'), { key: apiKey });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('plan_without_api_access');
      expectDocumented(res, '/files', 'get');
    });

    it('when the per-minute limit is used up, then the 429 and its Retry-After and limit headers match the document', async () => {
      const plan = `openapi-tight-${backend}`;
      await t.plan(plan, { api_access: true, requests_per_minute: 2, requests_per_day: 1000, max_file_size: 1024, daily_uploads: 10 });
      const { apiKey } = await t.account(plan);
      const statuses: number[] = [];
      let last: ApiResponse | undefined;
      for (let i = 0; i < 3; i++) {
        last = await call(t.url('/api/v1/stats'), { key: apiKey });
        statuses.push(last.status);
      }
      expect(statuses).to.deep.equal([200, 200, 429]);
      expect(last!.body.error.code).to.equal('rate_limited');
      expectDocumented(last!, '/stats', 'get');
      expect(last!.headers.get('x-ratelimit-remaining')).to.equal('0');
    });

    it('when /healthz and /readyz answer, then their bodies match the document', async () => {
      const health = await call(t.url('/healthz'));
      expect(health.status).to.equal(200);
      expectDocumented(health, '/healthz', 'get');
      const ready = await call(t.url('/readyz'));
      expect(ready.status).to.equal(200);
      expectDocumented(ready, '/readyz', 'get');
    });
  });
}

/** GET with the path sent byte for byte (fetch and URL would resolve `..` first). */
function rawGet(base: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('docs routes', () => {
  let base: string;
  const swaggerUiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

  before(async () => {
    // The real app (src/app.ts, started as the server starts it), so its
    // mount order is what is tested: the docs routes after the key-protected
    // /api/v1 router.
    base = (await sharedServer(backends[0]!)).server.url;
  });

  it('when the API router is mounted first, then it still asks for a key on its own routes', async () => {
    const res = await call(`${base}/api/v1/files`);
    expect(res.status).to.equal(401);
  });

  it('when the document is fetched without a key, then it is the OpenAPI document as JSON', async () => {
    const res = await call(`${base}/api/v1/openapi.json`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(res.body).to.deep.equal(JSON.parse(JSON.stringify(openApiDocument(PUBLIC_URL, scopes))));
  });

  it('when /docs is fetched, then it is HTML that loads only local assets and points at the document', async () => {
    const res = await call(`${base}/docs`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    const urls = [...res.text.matchAll(/\b(?:src|href)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]!);
    expect(urls).to.have.length.greaterThan(1);
    for (const url of urls) expect(url, url).to.match(/^\/docs\/assets\/[\w.-]+$/);
    expect(res.text).to.not.match(/https?:\/\//i);
    // Swagger UI's start is a file of its own (no inline script under the CSP: test/pages/docs-page.test.ts).
    expect(urls).to.include('/docs/assets/init.js');
    expect((await call(`${base}/docs/assets/init.js`)).text).to.match(/url:\s*['"]\/api\/v1\/openapi\.json['"]/);
  });

  it('when the assets the page references are fetched, then each is the package file with its content type (but our own init.js)', async () => {
    const page = await call(`${base}/docs`);
    const urls = [...page.text.matchAll(/\b(?:src|href)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]!).filter((url) => url !== '/docs/assets/init.js');
    for (const url of urls) {
      const res = await fetch(base + url);
      expect(res.status, url).to.equal(200);
      const type = url.endsWith('.css') ? /^text\/css/ : /^text\/javascript/;
      expect(res.headers.get('content-type'), url).to.match(type);
      expect(res.headers.get('x-content-type-options'), url).to.equal('nosniff');
      const body = Buffer.from(await res.arrayBuffer());
      const file = await readFile(join(swaggerUiDir, url.slice('/docs/assets/'.length)));
      expect(body.equals(file), url).to.equal(true);
      const head = await fetch(base + url, { method: 'HEAD' });
      expect(head.status, `HEAD ${url}`).to.equal(200);
      expect(head.headers.get('content-length'), `HEAD ${url}`).to.equal(String(file.length));
    }
  });

  for (const path of [
    '/docs/assets/../package.json',
    '/docs/assets/..%2fpackage.json',
    '/docs/assets/%2e%2e%2fpackage.json',
    '/docs/assets/..%2f..%2f..%2fpackage.json',
    '/docs/assets/..%5cpackage.json',
    '/docs/assets/package.json',
    '/docs/assets/index.html',
    '/docs/assets/swagger-ui.css.map',
    '/docs/assets/constructor',
    '/docs/assets/',
  ]) {
    it(`when ${path} is asked for, then 404 and no file content`, async () => {
      const res = await rawGet(base, path);
      expect(res.status).to.equal(404);
      expect(res.body).to.not.include('swagger-ui-dist');
      expect(res.body).to.not.include('<html');
    });
  }
});
