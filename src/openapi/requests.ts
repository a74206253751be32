// The OpenAPI description of file requests (issue 45, docs/file-requests.md):
// the owner's four operations under /api/v1/requests, and the outsider's
// routes under /r/{token} (no key: the link is the credential). The body and
// answer schemas are src/requests/schemas.ts's.
import { z } from 'zod';
import { newRequestSchema } from '../requests/schemas.js';
import { count, ok, pageQuery, paginationSchema } from '../wire-schemas.js';
import { API_KEY, apiErrors, bodyTimeout, codes, error, json, type Operation, type PathItem, ref, type Response, success, uploadTooMany, uploadTooSlow, type AnswerSchemas } from './shared.js';

const OUTSIDE = [{ url: '/', description: 'Outside the versioned API' }];

export function requestPaths({ request, file }: AnswerSchemas): Record<string, PathItem> {
  const notFound = error(`No such request in this account (another account's, or a closed one, gives the same answer): ${codes('request_not_found')}.`);
  const idParameter = { name: 'request_id', in: 'path' as const, required: true, description: 'The request\'s `request_id`.', schema: { type: 'string' } };
  const own = (op: Omit<Operation, 'tags' | 'security'>): Operation => ({ ...op, tags: ['requests'], security: API_KEY });
  return {
    '/requests': {
      get: own({
        operationId: 'listRequests',
        summary: 'List the account\'s open file requests, newest first',
        requestParams: { query: pageQuery },
        responses: { '200': success('One page.', z.strictObject({ success: ok, requests: z.array(request), pagination: paginationSchema })), ...apiErrors, '400': error(`${codes('invalid_parameter')}.`) },
      }),
      post: own({
        operationId: 'createRequest',
        summary: 'Make a file request: an upload link for people without an account',
        description: 'Files sent through its link land in this account as ordinary files (with `request_id`), counted against the plan like the owner\'s own uploads.',
        requestBody: { required: true, content: json(newRequestSchema) },
        responses: { '201': success('The new request.', z.strictObject({ success: ok, request })), ...apiErrors, '400': error(`A bad body: ${codes('invalid_file_request')}.`), '408': bodyTimeout },
      }),
    },
    '/requests/{request_id}': {
      parameters: [idParameter],
      get: own({
        operationId: 'getRequest',
        summary: 'A file request and the files it received',
        responses: { '200': success('The request; its files newest first.', z.strictObject({ success: ok, request, files: z.array(file) })), ...apiErrors, '404': notFound },
      }),
      delete: own({
        operationId: 'closeRequest',
        summary: 'Close a file request (its link answers 404; received files stay)',
        description: 'Its uploads in progress end with it: what they held (places, daily uploads, reserved bytes) comes back in the statement that closes it, and those still sending, on any instance, are cut with 404 `request_not_found`; nothing of them is kept.',
        responses: { '200': success('Closed.', z.strictObject({ success: ok, message: z.string() })), ...apiErrors, '404': notFound },
      }),
    },
    ...linkPaths(),
  };
}

/** The outsider's routes: every one passes the link's guard, so every one may answer these. */
function linkPaths(): Record<string, PathItem> {
  const tokenParameter = { name: 'token', in: 'path' as const, required: true, description: 'The token of the request\'s `upload_link`.', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' } };
  const guard: Record<string, Response> = {
    '401': error(`The request has a password: none was sent (${codes('password_required')}) or it is wrong (${codes('wrong_password')}, counted toward the address's failures); with \`WWW-Authenticate: Basic\`.`, { 'WWW-Authenticate': ref('headers', 'BasicChallenge') }, false),
    '404': error(`Unknown or closed request: ${codes('request_not_found')}; also an upload in progress when the owner closed the request (cut, nothing kept).`, {}, false),
    '410': error(`${codes('request_expired')}, or (uploads) ${codes('request_full')}: its \`max_files\` are taken by files received and uploads in progress; or (uploads) ${codes('upload_expired')}: the upload was still in progress \`REQUEST_UPLOAD_EXPIRY\` after it began (a tus upload: its creation), and nothing of it was kept. An upload in progress when the request expires is cut with ${codes('request_expired')}.`, {}, false),
    '429': error(`Per client address: ${codes('request_link_limited')} (\`REQUEST_LINK_REQUESTS_PER_MINUTE\`, \`REQUEST_LINK_UPLOADS_PER_HOUR\`), ${codes('too_many_failures')} (unknown tokens, wrong passwords); the owner's ${codes('too_many_uploads')}.`, { 'Retry-After': ref('headers', 'Retry-After') }, false),
    '500': error(`${codes('internal_error')}.`, {}, false),
  };
  const link = (op: Omit<Operation, 'tags' | 'security'>): Operation => ({ ...op, tags: ['requests'], security: [], responses: { ...guard, ...op.responses } });
  // Writes only: a browser's request for another site's page could carry the visitor's cached password (cross-site.ts).
  const crossSite = `${codes('cross_site_request')}: a browser sent it for another site's page (\`Sec-Fetch-Site\` other than \`same-origin\` or \`none\`, or an \`Origin\` other than \`PUBLIC_URL\`'s or the host's), refused before any limit, password or byte; clients that send neither header are not affected`;
  const owners = error(`The owner's limits, as the owner would get them: ${codes('file_too_large')} (the smaller of the plan's and the request's \`max_file_size\`), ${codes('daily_upload_limit')}, ${codes('storage_quota_exceeded')}. Or ${crossSite}.`, {}, false);
  const tusNote = 'tus 1.0.0 with the same extensions, limits and takeover rules as `/api/v1/uploads`; the upload is the owner\'s. An upload takes a place of `max_files` when it is created and gives it back when it is terminated or expires. It expires `REQUEST_UPLOAD_EXPIRY` after its creation at the latest (and never after its request), however often it is written (`Upload-Expires`); a PATCH still sending then is cut with 410 `upload_expired` and the upload removed. Answers never carry the file\'s id or link; there is no listing and no JSON view.';
  return {
    '/r/{token}': {
      servers: OUTSIDE,
      parameters: [tokenParameter],
      get: link({
        operationId: 'requestPage',
        summary: 'The upload page of a file request (HTML)',
        description: 'Choose or drop files; each goes up through tus with a progress bar. Same CSP as `/app`. A closed, unknown, expired or full request answers 404 or 410 as an HTML page saying why to a client that prefers `text/html` (a browser), and as the JSON error to any other. A full request is one that has received `max_files` files.',
        responses: { '200': { description: 'The page.', content: { 'text/html': { schema: { type: 'string' } } } } },
      }),
    },
    '/r/{token}/files': {
      servers: OUTSIDE,
      parameters: [tokenParameter],
      post: link({
        operationId: 'sendFileToRequest',
        summary: 'Send one file through a file request (multipart, as `/files/upload`)',
        description: 'One part named `file`. Other fields are ignored (the owner\'s file options are not the sender\'s to choose). The answer is a receipt.',
        requestBody: { required: true, content: { 'multipart/form-data': { schema: { type: 'object', required: ['file'], properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } } } } } },
        responses: {
          '201': { description: 'Stored in the owner\'s account.', content: json(z.strictObject({ success: ok, filename: z.string(), size: count('Bytes.') })) },
          '400': error(`${codes('invalid_multipart', 'missing_file', 'multiple_files', 'unexpected_file_part', 'too_many_parts', 'invalid_filename', 'upload_aborted')}.`, {}, false),
          '403': owners,
          '408': uploadTooSlow,
          '503': error(`${codes('store_unavailable')} or ${codes('server_busy')}.`, { 'Retry-After': ref('headers', 'Retry-After') }, false),
        },
      }),
    },
    '/r/{token}/uploads': {
      servers: OUTSIDE,
      parameters: [tokenParameter],
      options: link({ operationId: 'requestTusOptions', summary: 'What the tus server supports (Tus-Max-Size: the file size that applies)', description: tusNote, responses: { '204': { description: 'Capabilities.' } } }),
      post: link({
        operationId: 'createRequestUpload',
        summary: 'Create a resumable upload through a file request',
        description: tusNote,
        responses: {
          '201': { description: 'Created; `Location` is `/r/{token}/uploads/<upload_id>`.' },
          '400': error(`Bad tus headers: ${codes('invalid_upload_length', 'invalid_upload_metadata', 'invalid_filename')}.`, {}, false),
          '403': owners,
          '412': error(`${codes('tus_version_unsupported')}.`, {}, false),
          '503': error(`${codes('store_unavailable')} or ${codes('server_busy')}.`, { 'Retry-After': ref('headers', 'Retry-After') }, false),
        },
      }),
    },
    '/r/{token}/uploads/{upload_id}': {
      servers: OUTSIDE,
      parameters: [tokenParameter, ref('parameters', 'UploadId')],
      head: link({ operationId: 'getRequestUploadOffset', summary: 'Ask where to continue', description: tusNote, responses: { '200': { description: '`Upload-Offset` and `Upload-Length`.' } } }),
      patch: link({
        operationId: 'appendToRequestUpload',
        summary: 'Write bytes at the offset',
        description: tusNote,
        responses: {
          '204': { description: 'Stored.' },
          '400': error(`${codes('invalid_upload_offset', 'upload_length_exceeded', 'upload_aborted')}.`, {}, false),
          '403': owners,
          '408': uploadTooSlow,
          '409': error(`${codes('upload_offset_mismatch', 'upload_busy')}.`, {}, false),
          '429': uploadTooMany,
          '460': error(`${codes('checksum_mismatch')}.`, {}, false),
        },
      }),
      delete: link({ operationId: 'terminateRequestUpload', summary: 'Terminate an unfinished upload (its place comes back)', description: tusNote, responses: { '204': { description: 'Terminated.' }, '403': error(`${crossSite}.`, {}, false), '409': error(`${codes('upload_complete', 'upload_busy')}.`, {}, false) } }),
    },
  };
}
