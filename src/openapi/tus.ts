// The OpenAPI description of the tus routes (src/tus/routes.ts); see document.ts.
// The answers of GET /uploads and GET /uploads/{upload_id} are described
// here, not yet beside their presenters (src/tus/upload-list.ts, routes.ts).
import { z } from 'zod';
import { bytes, ok, pageQuery, paginationSchema } from '../wire-schemas.js';
import {
  API_KEY,
  apiErrors,
  codes,
  error,
  ref,
  success,
  type Header,
  type DocumentInput,
  type Operation,
  type Parameter,
  type PathItem,
  type Response,
  uploadTooMany,
  type AnswerSchemas,
} from './shared.js';
import { TUS_EXTENSIONS } from '../tus/headers.js';

const headerRef = (name: string) => ref('headers', name);
const parameterRef = (name: string) => ref('parameters', name);
const bare = (description: string, headers: Response['headers']): Response => ({ description, headers });

/** Adds the tus headers and parameters to the shared components. */
export function withTus(components: DocumentInput['components']): DocumentInput['components'] {
  const header = (description: string, schema: Header['schema']): Header => ({ description, schema });
  const inHeader = (name: string, description: string, schema: Parameter['schema'], required = false): Parameter => ({ name, in: 'header', required, description, schema });
  Object.assign(components.headers, {
    'Tus-Resumable': header('The protocol version, on every answer of the upload routes.', { type: 'string', const: '1.0.0' }),
    'Tus-Version': header('Versions the server speaks.', { type: 'string', const: '1.0.0' }),
    'Tus-Extension': header('Extensions the server supports.', { type: 'string', examples: [TUS_EXTENSIONS] }),
    'Tus-Max-Size': header('The caller\'s plan `max_file_size`, in bytes.', { type: 'integer', minimum: 0 }),
    'Tus-Checksum-Algorithm': header('Algorithms of `Upload-Checksum`.', { type: 'string', const: 'sha256' }),
    Location: header('The upload\'s URL, relative to the host (`/api/v1/uploads/<upload_id>`, under PUBLIC_URL\'s path).', { type: 'string', pattern: '^/.*api/v1/uploads/[A-Za-z0-9_-]{22}$' }),
    'Upload-Offset': header('Bytes of the upload durably stored: where the next PATCH continues.', { type: 'integer', minimum: 0 }),
    'Upload-Expires': header('When the unfinished upload expires unless written to (RFC 7231 date; each write extends it by RESUMABLE_EXPIRY). Absent once it is a file.', { type: 'string' }),
    'Dropstream-File-Id': header('Once the upload is a file (its last PATCH, and HEAD after it): the `file_id`.', { type: 'integer', minimum: 1 }),
    'Dropstream-Public-Link': header('Once the upload is a file: its `public_link`.', { type: 'string', format: 'uri' }),
  });
  Object.assign(components.parameters, {
    UploadId: { name: 'upload_id', in: 'path', required: true, description: 'From `Location`: 22 characters of base64url. Another account\'s upload is 404 like a missing one.', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' } },
    TusResumable: inHeader('Tus-Resumable', 'Must be `1.0.0` (412 otherwise).', { type: 'string', const: '1.0.0' }, true),
    UploadLength: inHeader('Upload-Length', 'Total size in bytes; over the plan\'s `max_file_size` is 403 `file_too_large`. On PATCH, only to declare a deferred length.', { type: 'integer', minimum: 0 }),
    UploadDeferLength: inHeader('Upload-Defer-Length', '`1` when the size is not known yet (instead of `Upload-Length`); bytes are then counted against `max_file_size` as they arrive.', { type: 'integer', const: 1 }),
    UploadMetadata: inHeader('Upload-Metadata', 'Comma-separated `key base64(value)` pairs; `filename` is required (cleaned like a multipart upload\'s filename). The upload options of a plain upload go here too, as keys `expires_in`, `max_downloads` and `password` (values as text, e.g. `max_downloads MQ==` for 1); they apply to the file it becomes.', { type: 'string', examples: ['filename cmVwb3J0LnBkZg=='] }),
    UploadOffset: inHeader('Upload-Offset', 'Where this body continues: the offset HEAD reported.', { type: 'integer', minimum: 0 }, true),
    UploadChecksum: inHeader('Upload-Checksum', '`sha256 <base64 digest>` of this body; on mismatch nothing of it is kept (460).', { type: 'string' }),
  });
  return components;
}

export function tusPaths({ file }: AnswerSchemas): Record<string, PathItem> {
  const { file_id, filename } = file.shape;
  const tus = { 'Tus-Resumable': headerRef('Tus-Resumable') };
  const operation = (operationId: string, summary: string, description: string, extra: Partial<Operation>, responses: Operation['responses']): Operation => ({
    operationId,
    summary,
    description,
    tags: ['uploads'],
    security: API_KEY,
    ...extra,
    responses: { ...apiErrors, ...responses },
  });
  const notFound = error(`No such upload in this account, or it expired: ${codes('upload_not_found')}.`);
  const badVersion = error(`\`Tus-Resumable\` is missing or not 1.0.0: ${codes('tus_version_unsupported')} (with \`Tus-Version\`).`, { 'Tus-Version': headerRef('Tus-Version') });
  const body = { 'application/offset+octet-stream': { schema: { type: 'string', contentMediaType: 'application/offset+octet-stream' } } };
  const store = error(`${codes('store_unavailable')}, or ${codes('server_busy')} (too many uploads in flight on this instance, or this account holds its share of them).`, { 'Retry-After': headerRef('Retry-After') });

  const uploadFields = {
    upload_id: z.string().regex(/^[A-Za-z0-9_-]{22}$/),
    filename,
    offset: bytes('Stored so far'),
    length: z.number().int().min(0).nullable().meta({ description: 'Upload-Length; null while deferred.' }),
  };

  return {
    '/uploads': {
      get: operation(
        'listUploads',
        'List the account\'s unfinished uploads, newest first',
        'Not part of tus: the uploads not yet files and not expired. Each holds a daily upload slot and, under `max_total_size`, the bytes it stored, until it finishes, expires (`expires_at`) or is terminated (DELETE its `url`). Paged as `GET /files`; needs no `Tus-Resumable`.',
        { requestParams: { query: pageQuery } },
        {
          '200': success('One page of unfinished uploads.', z.strictObject({
            success: ok,
            uploads: z.array(z.strictObject({
              ...uploadFields,
              url: z.string().meta({ description: 'The upload\'s URL, as `Location` gave it: PATCH to resume, DELETE to terminate.' }),
              expires_at: z.string().meta({ description: 'UTC `YYYY-MM-DD HH:MM:SS`: when it expires unless written to.' }),
            })).max(100),
            pagination: paginationSchema,
          })),
          '400': error(`\`page\` or \`limit\` is not an integer in range (or is repeated): ${codes('invalid_parameter')}.`),
        },
      ),
      options: operation('tusOptions', 'What the tus server supports', 'Not counted differently from any API request.', {}, {
        '204': bare('The protocol\'s capabilities and the caller\'s size limit.', { 'Tus-Version': headerRef('Tus-Version'), 'Tus-Extension': headerRef('Tus-Extension'), 'Tus-Max-Size': headerRef('Tus-Max-Size'), 'Tus-Checksum-Algorithm': headerRef('Tus-Checksum-Algorithm') }),
      }),
      post: operation(
        'createUpload',
        'Create a resumable upload',
        'Takes a daily upload slot (403 `daily_upload_limit` when none is left); the slot comes back if the upload is terminated or expires unfinished. With a body (`Content-Type: application/offset+octet-stream`) the first bytes are stored at once (creation-with-upload).',
        { parameters: [parameterRef('TusResumable'), parameterRef('UploadLength'), parameterRef('UploadDeferLength'), parameterRef('UploadMetadata'), parameterRef('UploadChecksum')], requestBody: { required: false, content: body } },
        {
          '201': bare('Created. `Upload-Expires` comes too; with a body that finished the upload, the file headers.', { ...tus, Location: headerRef('Location'), 'Upload-Offset': headerRef('Upload-Offset') }),
          '400': error(`Bad tus headers: ${codes('invalid_upload_length', 'invalid_upload_metadata', 'invalid_filename', 'invalid_checksum', 'unsupported_checksum_algorithm')}; a bad upload option: ${codes('invalid_expires_in', 'invalid_max_downloads', 'invalid_password')}.`),
          '403': error(`${codes('plan_without_api_access')}, ${codes('file_too_large')} (\`Upload-Length\` over \`max_file_size\`, before anything is taken) ${codes('daily_upload_limit')}, or ${codes('storage_quota_exceeded')} (\`Upload-Length\` over the room the plan's \`max_total_size\` leaves, before anything is taken).`),
          '412': badVersion,
          '429': uploadTooMany,
          '503': store,
        },
      ),
    },
    '/uploads/{upload_id}': {
      parameters: [parameterRef('UploadId')],
      head: operation('getUploadOffset', 'Ask where to continue', 'The offset durably stored. If the request that stored the last byte was cut before the upload became a file, this finishes it.', { parameters: [parameterRef('TusResumable')] }, {
        '200': bare('`Upload-Length` (or `Upload-Defer-Length: 1`), `Upload-Expires` while unfinished, the file headers once finished; `Cache-Control: no-store`.', { ...tus, 'Upload-Offset': headerRef('Upload-Offset') }),
        '404': bare('No such upload in this account, or it expired.', tus),
        '412': bare('`Tus-Resumable` is missing or not 1.0.0.', { 'Tus-Version': headerRef('Tus-Version') }),
      }),
      patch: operation(
        'appendToUpload',
        'Write bytes at the offset',
        'Streams the body into the upload at `Upload-Offset`. If the connection is cut, what arrived is kept and HEAD reports it. A newer request for the upload (PATCH, HEAD or DELETE, on any instance) takes it over: this PATCH stores what it received (what was already in flight too), answers 409 `upload_busy` with `Upload-Offset` and `Connection: close`, and the newer one goes on from there. The PATCH that stores the last byte makes the upload a file, exactly like a multipart upload, and its answer carries `Dropstream-File-Id` and `Dropstream-Public-Link`. Each PATCH counts as one request against the per-minute and per-day limits.',
        { parameters: [parameterRef('TusResumable'), parameterRef('UploadOffset'), parameterRef('UploadLength'), parameterRef('UploadChecksum')], requestBody: { required: true, content: body } },
        {
          '204': bare('Stored. `Upload-Expires` while unfinished, the file headers once finished.', { ...tus, 'Upload-Offset': headerRef('Upload-Offset') }),
          '400': error(`${codes('invalid_upload_offset', 'invalid_upload_length', 'upload_length_exceeded', 'invalid_checksum', 'unsupported_checksum_algorithm', 'upload_aborted')}.`),
          '403': error(`${codes('file_too_large')}: a deferred-length upload passed \`max_file_size\` (the upload is removed and its slot comes back). ${codes('storage_quota_exceeded')}: the account's stored bytes would pass \`max_total_size\`; what arrived before is kept (\`Upload-Offset\`), and the upload can go on once there is room.`),
          '404': notFound,
          '409': error(`${codes('upload_offset_mismatch')} (with the real \`Upload-Offset\`) or ${codes('upload_busy')} (another request is writing; with \`Retry-After\`).`),
          '412': badVersion,
          '408': error(`${codes('upload_too_slow')}: the body came slower than \`UPLOAD_MIN_RATE\` over \`UPLOAD_RATE_WINDOW\`; what arrived is kept (with \`Upload-Offset\`) and the connection is closed.`, { 'Upload-Offset': headerRef('Upload-Offset') }, false),
          '415': error(`The body is not \`application/offset+octet-stream\`: ${codes('unsupported_media_type')}.`),
          '429': uploadTooMany,
          '460': error(`\`Upload-Checksum\` does not match the body: ${codes('checksum_mismatch')}; nothing of it was kept.`),
          '503': store,
        },
      ),
      delete: operation('terminateUpload', 'Terminate an unfinished upload', 'Removes its bytes and gives its daily slot back.', { parameters: [parameterRef('TusResumable')] }, {
        '204': bare('Terminated.', tus),
        '404': notFound,
        '409': error(`${codes('upload_complete')} (delete the file instead) or ${codes('upload_busy')}.`),
        '412': badVersion,
      }),
      get: operation('getUpload', 'The upload and the file it became', 'Not part of tus: the upload\'s state as JSON and, once finished, the file record (the same as GET /files/{file_id}). Needs no `Tus-Resumable`.', {}, {
        '200': success('The upload.', z.strictObject({
          success: ok,
          upload: z.strictObject({
            ...uploadFields,
            expires_at: z.string().nullable().meta({ description: 'UTC `YYYY-MM-DD HH:MM:SS` while unfinished; null once a file.' }),
          }),
          file: file.nullable().meta({ description: `The file once finished (its \`file_id\`: ${file_id.description})` }),
        })),
        '404': notFound,
      }),
    },
  };
}
