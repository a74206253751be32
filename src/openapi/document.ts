// The OpenAPI 3.1 description of the public listener: the versioned API under
// /api/v1, public download links, health checks and these docs. Built per
// PUBLIC_URL, because the shape of public links depends on it; its servers
// are relative to wherever the document is served from. Built on the first
// request for it (src/http/docs-routes.ts), never at start.
// Request and answer schemas are the zod schemas the routes validate with and
// the presenters are typed by (src/*/schemas.ts), rendered by zod-openapi.
// Error codes and their statuses come from src/error-codes.ts; which codes
// each operation answers is written here. When a route changes what it
// answers, change it here too (test/contract/openapi.test.ts validates real
// responses against this document).

import { z } from 'zod';
import { createDocument, type ZodOpenApiObject } from 'zod-openapi';
import { fileIdPath } from '../files/schemas.js';
import { bytes, count, ok, pageQuery, paginationSchema } from '../wire-schemas.js';
import { linkPaths } from './links.js';
import { tusPaths, withTus } from './tus.js';
import { webhookEvents, webhookPaths, webhookSchemas } from './webhooks.js';
import { keyPaths, keySchemas } from './keys.js';
import { SCOPES } from '../accounts/scopes.js';
import { routeKey, type RouteScopes } from '../http/scoped.js';
import { requestPaths } from './requests.js';
import { directPaths } from './direct.js';
import {
  API_KEY,
  answerSchemas,
  type AnswerSchemas,
  apiErrors,
  codes,
  error,
  errorSchema,
  type DocumentInput,
  type Header,
  json,
  type OpenApiDocument,
  type Operation,
  type PathItem,
  ref,
  type Response,
  type Schema,
  success,
  uploadTooMany,
  uploadOptionFields,
  uploadTooSlow,
} from './shared.js';

// The document's types, for those who read the document (the tests).
export type { Header, OpenApiDocument, Operation, Parameter, PathItem, Ref, Response, Schema } from './shared.js';

const PUBLIC: Operation['security'] = [];

function components(s: AnswerSchemas): DocumentInput['components'] {
  const header = (description: string, schema: Schema): Header => ({ description, schema });
  const whenLimited =
    'Sent on every response to a request that passed authentication and the plan check (not on 401, 403 `plan_without_api_access` or 429 `too_many_failures`). It describes the window closest to refusing, or the one that refused.';
  return {
    securitySchemes: {
      bearerAuth: { type: 'http', scheme: 'bearer', description: `The account's API key (\`ds_live_...\`) as \`Authorization: Bearer <API key>\`. Never read from the query string. A key holds scopes (${SCOPES.join(', ')}) or is full; each operation needs one (docs/keys.md), else 403 \`insufficient_scope\`.` },
    },
    schemas: {
      File: s.file,
      Link: s.link,
      ...webhookSchemas(),
      ...keySchemas(),
      FileRequest: s.request,
      Pagination: paginationSchema,
      Error: errorSchema(),
    },
    responses: {
      Unauthorized: error(`Missing or invalid API key: ${codes('missing_api_key', 'invalid_api_key')}.`, { 'WWW-Authenticate': ref('headers', 'WWW-Authenticate') }, false),
      Forbidden: error(`The account's plan does not include the API: ${codes('plan_without_api_access')}; the key lacks the scope the operation needs (docs/keys.md: each operation's summary or the Keys page names it): ${codes('insufficient_scope')}, with \`WWW-Authenticate: Bearer error="insufficient_scope", scope="..."\`; the key may not be used from this address: ${codes('address_not_allowed')}.`, {}, false),
      TooManyRequests: error(
        `${codes('rate_limited')}: the plan's requests per minute or per day are used up (with the rate-limit headers of the refusing window). ${codes('too_many_failures')}: this address sent too many bad API keys in the last minute. ${codes('too_many_requests_in_flight')}: the account already has \`ACCOUNT_REQUESTS_IN_FLIGHT\` requests (plus its plan's \`concurrent_uploads\`) in progress on this instance.`,
        { 'Retry-After': ref('headers', 'Retry-After') },
      ),
      InternalError: error(`An unexpected failure: ${codes('internal_error')}; details are in the server log only.`),
      MethodNotAllowed: error(`The path exists but not with this method: ${codes('method_not_allowed')}. Never the answer to a documented operation.`, { Allow: ref('headers', 'Allow') }, false),
    },
    parameters: {
      // FileId, Page and Limit are registered from their zod schemas (`.meta({ param: { id } })`).
      Token: { name: 'token', in: 'path', required: true, description: 'The opaque link token from `public_link` (case-sensitive).', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]+$' } },
      Range: { name: 'Range', in: 'header', description: 'One byte range, e.g. `bytes=0-99`. Several ranges, or a malformed header, get the whole file.', schema: { type: 'string' } },
      IfRange: { name: 'If-Range', in: 'header', description: 'An ETag; when it no longer matches, the whole file is sent instead of the range.', schema: { type: 'string' } },
      IfNoneMatch: { name: 'If-None-Match', in: 'header', description: 'An ETag; when it matches, 304.', schema: { type: 'string' } },
    },
    headers: {
      'X-RateLimit-Limit': header(`Requests allowed in the window. ${whenLimited}`, { type: 'integer', minimum: 0 }),
      'X-RateLimit-Remaining': header(`Requests left in the window. ${whenLimited}`, { type: 'integer', minimum: 0 }),
      'X-RateLimit-Reset': header(`When the window ends, in Unix time (seconds). ${whenLimited}`, { type: 'integer', minimum: 0 }),
      'RateLimit-Policy': header(`The plan's windows (IETF draft-ietf-httpapi-ratelimit-headers). ${whenLimited}`, { type: 'string', examples: ['"minute";q=50;w=60, "day";q=5000;w=86400'] }),
      RateLimit: header(`The window's state: remaining requests and seconds to reset. ${whenLimited}`, { type: 'string', examples: ['"minute";r=49;t=58'] }),
      'Retry-After': header('Seconds to wait before trying again.', { type: 'integer', minimum: 0 }),
      'WWW-Authenticate': header('The Bearer challenge.', { type: 'string', examples: ['Bearer', 'Bearer error="invalid_token"'] }),
      BasicChallenge: header('`WWW-Authenticate` of a password-protected download link: browsers then ask for the password themselves.', { type: 'string', const: 'Basic realm="dropstream"' }),
      Allow: header('The methods the path accepts.', { type: 'string' }),
      'Content-Disposition': header('Always `attachment`, with an ASCII `filename` and a UTF-8 `filename*`.', { type: 'string' }),
      ETag: header('Strong ETag: the SHA-256 of the content.', { type: 'string', pattern: '^"[0-9a-f]{64}"$' }),
      'Accept-Ranges': header('Single byte ranges are served.', { type: 'string', const: 'bytes' }),
      'Content-Length': header('Bytes in this response (the whole file, or the range).', { type: 'integer', minimum: 0 }),
      PresignedLocation: header('The presigned GetObject URL of the object (S3_PRESIGNED_DOWNLOADS).', { type: 'string', format: 'uri' }),
      NoStore: header('`no-store`: the URL is short-lived, and each redirect may be counted.', { type: 'string', const: 'no-store' }),
      'Content-Range': header('On 206 `bytes <start>-<end>/<size>`; on 416 `bytes */<size>`.', { type: 'string', pattern: '^bytes (\\d+-\\d+|\\*)/\\d+$' }),
    },
  };
}

function apiPaths(s: AnswerSchemas): Record<string, PathItem> {
  const fileOperation = (operationId: string, summary: string, ok200: Response): Operation => ({
    operationId,
    summary,
    tags: ['files'],
    security: API_KEY,
    requestParams: { path: fileIdPath },
    responses: {
      '200': ok200,
      ...apiErrors,
      '400': error(`\`file_id\` is not a positive integer: ${codes('invalid_file_id')}.`),
      '404': error(`No such file in this account (another account's file gives the same answer): ${codes('file_not_found')}.`),
    },
  });
  return {
    '/files/upload': {
      post: {
        operationId: 'uploadFile',
        summary: 'Upload a file',
        description: 'Streams one file part into the object store, counting bytes against the plan\'s `max_file_size`. A refused or failed upload leaves no file and no count against the daily quota. The options `expires_in`, `max_downloads` and `password` are text fields that must come before the file part (the body is streamed, so a field after it is 400 `field_after_file`); other plain fields before it are ignored.',
        tags: ['files'],
        security: API_KEY,
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                required: ['file'],
                properties: { ...uploadOptionFields, file: { type: 'string', contentMediaType: 'application/octet-stream', description: 'The file content; exactly one file part, with a filename, after any option fields.' } },
              },
              encoding: { file: { contentType: 'application/octet-stream' } },
            },
          },
        },
        responses: {
          '201': success('The file is stored. The answer carries the spec\'s fields only; the file\'s expiry (`expires_at`) is read from `GET /files/{file_id}`.', s.upload),
          ...apiErrors,
          '400': error(`The body is not one valid file part named \`file\`: ${codes('invalid_multipart', 'missing_file', 'multiple_files', 'unexpected_file_part', 'too_many_parts', 'upload_aborted', 'invalid_filename')}; or a bad option: ${codes('field_after_file', 'invalid_expires_in', 'invalid_max_downloads', 'invalid_password')}.`),
          '403': error(`${codes('plan_without_api_access')} (no rate-limit headers), ${codes('file_too_large')} (sent as soon as the count passes \`max_file_size\`; the connection is then closed) or ${codes('daily_upload_limit')} (uploads for this UTC day used up), or ${codes('storage_quota_exceeded')} (the account's stored bytes would pass the plan's \`max_total_size\`; cut as soon as the count passes the free space, and the connection is closed). No request point is spent.`),
          '408': uploadTooSlow,
          '429': uploadTooMany,
          '503': error(`${codes('store_unavailable')}: the object store failed; nothing was stored. ${codes('server_busy')}: too many uploads in flight on this instance, or this account holds its share of them (all but a quarter of \`UPLOAD_CONCURRENCY\`).`, { 'Retry-After': ref('headers', 'Retry-After') }),
        },
      },
    },
    '/files': {
      get: {
        operationId: 'listFiles',
        summary: 'List the account\'s files, newest first',
        tags: ['files'],
        security: API_KEY,
        requestParams: { query: pageQuery },
        responses: {
          '200': success('One page of files.', z.strictObject({ success: ok, files: z.array(s.file).max(100), pagination: paginationSchema })),
          ...apiErrors,
          '400': error(`\`page\` or \`limit\` is not an integer in range (or is repeated): ${codes('invalid_parameter')}.`),
        },
      },
    },
    '/files/{file_id}': {
      get: fileOperation('getFile', 'Get one file\'s information', success('The file.', z.strictObject({ success: ok, file: s.file }))),
      delete: fileOperation('deleteFile', 'Delete a file', success(
        'The file is deleted; its public link is dead.',
        z.strictObject({ success: ok, message: z.string().meta({ examples: ['File deleted successfully'] }) }),
      )),
    },
    '/stats': {
      get: {
        operationId: 'getStats',
        summary: 'Account statistics and plan limits',
        tags: ['account'],
        security: API_KEY,
        responses: {
          '200': success('Statistics and limits.', z.strictObject({
            success: ok,
            stats: z.strictObject({
              total_files: count('Number of files in the account.'),
              total_size: bytes('Total size of the files'),
              reserved_size: bytes('Reserved against `max_total_size` by uploads in progress (plain, unfinished tus, through file requests), counted toward the quota as stored bytes are until each becomes a file or ends; always 0 on a plan without a quota'),
            }),
            limits: z.strictObject({
              max_file_size: bytes('Largest allowed file size'),
              daily_uploads: count('Uploads allowed per UTC day.'),
              concurrent_uploads: z.number().int().min(1).meta({ description: 'Uploads (plain, and tus requests with a body) the account may run at once on all instances; for a plan that sets none, the instance default (`ACCOUNT_UPLOAD_CONCURRENCY`). One more is 429 `too_many_uploads`.', examples: [4] }),
              max_total_size: z.number().int().min(1).meta({ format: 'int64' }).nullable().meta({ description: 'Bytes the account may store in all; null: no limit. An upload that would pass it is 403 `storage_quota_exceeded`.', examples: [107374182400, null] }),
              max_expires_in: z.number().int().min(1).nullable().meta({ description: 'Longest `expires_in` (seconds) an upload may ask for, and what uploads without one get; null: files may live for ever.', examples: [2592000, null] }),
            }),
            plan: z.string().meta({ description: 'Plan name, lower case.', examples: ['pro'] }),
          })),
          ...apiErrors,
        },
      },
    },
  };
}

function publicPaths(): Record<string, PathItem> {
  const servers = [{ url: '/', description: 'Outside the versioned API' }];
  const binary = { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } };
  const fileHeaders = Object.fromEntries(['Content-Disposition', 'ETag', 'Accept-Ranges', 'Content-Length'].map((h) => [h, ref('headers', h)]));
  const download = (method: 'get' | 'head'): Operation => {
    const body = method === 'get';
    const bare = (r: Response): Response => (body ? r : { description: r.description, ...(r.headers ? { headers: r.headers } : {}) });
    return {
      operationId: body ? 'downloadFile' : 'headDownloadFile',
      summary: body ? 'Download a file through its public link' : 'A file\'s download headers, without the body',
      description:
        'No API key: the link token is the credential, with the link\'s password when it has one (`Authorization: Basic`, any user name: `curl -u :secret`). Always an attachment, `application/octet-stream`, `X-Content-Type-Options: nosniff`. A GET that delivers the whole file and completes counts one download, on the file and on the link. ' +
        'A link with `max_downloads` N has a budget of N x size bytes: every response with a body takes its length from it (the whole file: its size; a range: the range\'s bytes) before the first byte is sent, in one atomic step shared by all instances, and a response that is cut short gives back the bytes it never sent. So N concurrent downloads of a link with `max_downloads: 1` give one complete body and 410s, and no sequence of requests through one link receives more than N x size bytes. HEAD and 304 take nothing.',
      tags: ['downloads'],
      security: PUBLIC,
      parameters: [ref('parameters', 'Range'), ref('parameters', 'IfRange'), ref('parameters', 'IfNoneMatch')],
      responses: {
        '200': bare({ description: 'The whole file.', headers: fileHeaders, content: binary }),
        '206': bare({ description: 'The requested range.', headers: { ...fileHeaders, 'Content-Range': ref('headers', 'Content-Range') }, content: binary }),
        '304': { description: '`If-None-Match` matched the ETag.', headers: { ETag: ref('headers', 'ETag') } },
        ...(body
          ? {
              '302': {
                description:
                  'Only with `S3_PRESIGNED_DOWNLOADS` on, for a GET of the whole file (no `Range`, or one that covers it) through a link with neither `max_downloads` nor a password: the store serves the bytes. `Location` is a presigned GetObject URL, valid `S3_PRESIGN_SECONDS` at most and never past the link\'s expiry, that makes the store answer with the same `Content-Disposition` and `application/octet-stream`; it counts one download when it is handed out. A `Range` of part of the file, a limited link and a password link are served as 206 or 200 by the app; HEAD and 304 are never redirected.',
                headers: {
                  Location: ref('headers', 'PresignedLocation'),
                  'Cache-Control': ref('headers', 'NoStore'),
                },
              },
            }
          : {}),
        '401': bare(error(`The link has a password: none was sent (${codes('password_required')}) or it is wrong (${codes('wrong_password')}, which counts toward the address's failures).`, { 'WWW-Authenticate': ref('headers', 'BasicChallenge') }, false)),
        '403': bare(error(`A password link that another site's page embeds (an image, a frame, a video, a fetch: \`Sec-Fetch-Site\` \`cross-site\` or \`same-site\`, not a top-level navigation): ${codes('cross_site_request')}, before the password is read. A link followed from another site (a mail) is served.`, {}, false)),
        '404': bare(error(`Unknown, revoked or deleted link: ${codes('file_not_found')}.`, {}, false)),
        '410': bare(error(`The link, or its file, has expired (${codes('link_expired')}), or its budget of \`max_downloads\` x size bytes has too little left for this response (${codes('link_exhausted')}).`, {}, false)),
        '416': bare(error(`The range is outside the file: ${codes('range_not_satisfiable')}.`, { 'Content-Range': ref('headers', 'Content-Range') }, false)),
        '429': bare(error(`This address asked for too many unknown links, or sent too many wrong link passwords, in the last minute: ${codes('too_many_failures')}. Once it is over the limit, a password-protected link refuses it even with the right password, until the window ends. The link took too many wrong passwords from all addresses: ${codes('link_password_locked')}, right or wrong, until the lock ends. Too many passwords wait to be checked on this instance: ${codes('password_checks_busy')} (nothing counted; try again).`, { 'Retry-After': ref('headers', 'Retry-After') }, false)),
        '500': bare(error(`${codes('internal_error')}.`, {}, false)),
        ...(body ? { '503': error(`The object store failed: ${codes('store_unavailable')}.`, { 'Retry-After': ref('headers', 'Retry-After') }, false) } : {}),
      },
    };
  };
  const readiness = z.strictObject({ status: z.enum(['ok', 'degraded', 'unavailable']), checks: z.record(z.string(), z.enum(['ok', 'down', 'degraded', 'off'])) });
  const uri = z.string().meta({ format: 'uri' });
  const plain = (operationId: string, summary: string, tag: string, responses: Operation['responses']): Operation => ({ operationId, summary, tags: [tag], security: PUBLIC, responses });
  return {
    '/download/{token}': { servers, parameters: [ref('parameters', 'Token')], get: download('get'), head: download('head') },
    '/healthz': { servers, get: plain('getHealth', 'The process answers', 'operations', { '200': { description: 'Alive, and the version it runs.', content: json(z.strictObject({ status: z.literal('ok'), version: z.string().meta({ description: 'package.json\'s version, e.g. 0.1.0' }) })) } }) },
    '/readyz': {
      servers,
      get: plain('getReadiness', 'The database, object store and Redis answer', 'operations', {
        '200': { description: 'Ready; `degraded` when Redis is down (limits then hold per instance).', content: json(readiness) },
        '503': { description: 'A dependency the API needs is down; `checks` names it.', content: json(readiness) },
      }),
    },
    '/openapi.json': { get: plain('getOpenApiDocument', 'This document', 'docs', { '200': { description: 'OpenAPI 3.1.0.', content: json({ type: 'object' }) } }) },
    '/docs': { servers, get: plain('getDocs', 'Interactive documentation (Swagger UI)', 'docs', { '200': { description: 'An HTML page.', content: { 'text/html': { schema: { type: 'string' } } } } }) },
    '/app': { servers, get: plain('getWebApp', 'The web app for account owners: sign in with an API key, upload, share, revoke (docs/web-app.md)', 'docs', { '200': { description: 'An HTML page (its scripts and styles are under /app/assets/).', content: { 'text/html': { schema: { type: 'string' } } } } }) },
    '/': {
      servers,
      get: plain('getHome', 'Where to go next: the web app, the documentation, the API and the README', 'docs', {
        '200': {
          description: 'A small HTML page for a browser (`Accept: text/html`), JSON otherwise.',
          content: {
            'text/html': { schema: { type: 'string' } },
            ...json(z.strictObject({ success: ok, service: z.literal('dropstream'), app: uri, docs: uri, openapi: uri, api: uri, readme: z.string() })),
          },
        },
      }),
    },
  };
}

const METHODS = ['get', 'post', 'delete', 'head', 'options', 'patch'] as const;

/**
 * Each key-protected operation's `security` names the scope its route
 * declares (need(scope), src/http/scoped.ts), read from the API router
 * itself: the document cannot name another. An operation the routes declare
 * unscoped, or that `scopes` has no route for while that feature's routes are
 * there, is a mistake here or there: thrown. A feature this server does not
 * run (no tus, no webhooks) has no routes to read: its operations keep
 * `[{ bearerAuth: [] }]`.
 */
function withScopes(paths: Record<string, PathItem>, scopes: RouteScopes): void {
  const routed = new Set([...scopes.keys()].map((key) => key.split(' ')[1]!.split('/')[1]));
  for (const [path, item] of Object.entries(paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op || op.security !== API_KEY) continue;
      const declared = scopes.get(routeKey(method, path));
      if (typeof declared === 'string') op.security = [{ bearerAuth: [declared] }];
      else if (declared || routed.has(path.split('/')[1])) throw new Error(`${method.toUpperCase()} ${path}: the API router declares no scope for it (${JSON.stringify(declared ?? 'no route')})`);
    }
  }
}

/**
 * The OpenAPI 3.1.0 document of the public listener; `publicUrl` has no
 * trailing slash. `scopes`: what the API router's routes declare
 * (declaredScopes(router, '/api/v1')), for each operation's scope; without
 * it every key-protected operation says `[{ bearerAuth: [] }]`.
 */
export function openApiDocument(publicUrl: string, scopes?: RouteScopes): OpenApiDocument {
  const s = answerSchemas(publicUrl);
  const input: DocumentInput = {
    openapi: '3.1.0',
    info: {
      title: 'dropstream',
      version: '1.0.0',
      description: [
        'File sharing: upload files, get a public download link for each, list, inspect and delete them, and read account statistics.',
        'Every `/api/v1` request needs `Authorization: Bearer <API key>` of an account whose plan includes the API (pro and above).',
        'Errors are always `{"success": false, "error": {"code", "message"}}`; unknown routes give 404 `not_found`, a known path with another method 405 `method_not_allowed` with `Allow`, a method no route knows (TRACE, PROPFIND, ...) 501 `not_implemented`. No error is ever 413: a file over the plan\'s limit is 403 `file_too_large`.',
        'Every response carries `X-Request-Id` (yours, when you send a valid one).',
      ].join('\n\n'),
    },
    // Relative, so "Try it out" in Swagger UI calls the origin the page was
    // opened from (127.0.0.1, a proxy's name), not necessarily PUBLIC_URL.
    servers: [{ url: '/api/v1', description: 'The versioned API' }],
    tags: [
      { name: 'files', description: 'Upload, list, inspect and delete files.' },
      { name: 'links', description: 'A file\'s public links: list them, make more with their own expiry, download limit and password, revoke or rotate them.' },
      { name: 'uploads', description: 'Resumable uploads (tus 1.0.0): create, write from an offset, ask the offset, terminate; and uploads straight to the store (S3_DIRECT_UPLOADS): create, sign parts, complete, abort.' },
      { name: 'webhooks', description: 'Signed event deliveries to the account\'s own URLs (Standard Webhooks): add, list, remove, rotate the secret, see deliveries. The events sent are under `webhooks`.' },
      { name: 'requests', description: 'File requests: upload links through which people without an account send files into the account (the owner\'s routes need the key; the `/r/{token}` routes do not).' },
      { name: 'keys', description: 'The account\'s API keys: make one with scopes, an expiry and address ranges (never wider than the key making it), list them, revoke one.' },
      { name: 'audit', description: 'What changed the account, who did it (which key, or which file request link), when and from which network.' },
      { name: 'account', description: 'Statistics and plan limits.' },
      { name: 'downloads', description: 'Public download links, without a key.' },
      { name: 'operations', description: 'Liveness and readiness.' },
      { name: 'docs', description: 'This description and its viewer.' },
    ],
    paths: { ...apiPaths(s), ...linkPaths(s), ...webhookPaths(), ...keyPaths(), ...requestPaths(s), ...directPaths(s), ...tusPaths(s), ...publicPaths() },
    webhooks: webhookEvents(),
    components: withTus(components(s)),
  };
  if (scopes) withScopes(input.paths, scopes);
  // zod-openapi's input is this document with zod schemas in it; its output is the same document in JSON Schema.
  return createDocument(input as unknown as ZodOpenApiObject, { reused: 'inline' }) as unknown as OpenApiDocument;
}
