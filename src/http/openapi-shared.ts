// What the OpenAPI description of the API (openapi.ts) and of its tus routes
// (openapi-tus.ts) both build with: the document's types, schema helpers and
// the responses many operations share. Both import it; it imports neither.

import { type ErrorCode } from '../error-codes.js';

/** A JSON Schema (2020-12, the OpenAPI 3.1 dialect), kept loose on purpose. */
export type Schema = { [keyword: string]: unknown };
export type Ref = { $ref: string };
export interface Header { description: string; schema: Schema }
export interface Parameter { name: string; in: 'path' | 'query' | 'header'; required?: boolean; description: string; schema: Schema }
export interface MediaType { schema?: Schema; encoding?: Record<string, { contentType: string }> }
export interface Response { description: string; headers?: Record<string, Ref>; content?: Record<string, MediaType> }
export interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Array<Record<string, string[]>>;
  parameters?: Array<Parameter | Ref>;
  requestBody?: { required: boolean; content: Record<string, MediaType> };
  responses: Record<string, Response | Ref>;
}
export interface PathItem {
  servers?: Array<{ url: string; description?: string }>;
  parameters?: Array<Parameter | Ref>;
  get?: Operation;
  post?: Operation;
  delete?: Operation;
  head?: Operation;
  options?: Operation;
  patch?: Operation;
}
export interface OpenApiDocument {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  servers: Array<{ url: string; description?: string }>;
  tags: Array<{ name: string; description: string }>;
  paths: Record<string, PathItem>;
  /** What the service sends (OpenAPI 3.1): the webhook events, by type. */
  webhooks?: Record<string, PathItem>;
  components: {
    schemas: Record<string, Schema>;
    responses: Record<string, Response>;
    parameters: Record<string, Parameter>;
    headers: Record<string, Header>;
    securitySchemes: Record<string, { type: 'http'; scheme: 'bearer'; description: string }>;
  };
}

export const ref = (kind: keyof OpenApiDocument['components'], name: string): Ref => ({ $ref: `#/components/${kind}/${name}` });
export const json = (schema: Schema) => ({ 'application/json': { schema } });
export const object = (properties: Record<string, Schema>, description?: string): Schema => ({
  type: 'object',
  ...(description ? { description } : {}),
  required: Object.keys(properties),
  additionalProperties: false,
  properties,
});
export const count = (description: string): Schema => ({ type: 'integer', format: 'int64', minimum: 0, description });
export const bytes = (description: string): Schema => ({ type: 'integer', format: 'int64', minimum: 0, description: `${description}, in bytes` });
export const ok: Schema = { type: 'boolean', const: true };
export const codes = (...names: ErrorCode[]) => names.map((c) => `\`${c}\``).join(', ');
export const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

export const API_KEY = [{ bearerAuth: [] }];

export const rateHeaders = Object.fromEntries(
  ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'].map((name) => [name, ref('headers', name)]),
);

/** An error response: the Error body, the codes it can carry, and the rate-limit state when the request got that far. */
export function error(description: string, extra: Record<string, Ref> = {}, limited = true): Response {
  return { description, headers: { ...(limited ? rateHeaders : {}), ...extra }, content: json(ref('schemas', 'Error')) };
}

/** The errors every /api/v1 operation can give, on top of its own. */
export const apiErrors = {
  '401': ref('responses', 'Unauthorized'),
  '403': ref('responses', 'Forbidden'),
  '429': ref('responses', 'TooManyRequests'),
  '500': ref('responses', 'InternalError'),
};

/** The upload refusals of issue 20, on every operation that receives an upload body. */
export const uploadTooSlow = error(
  `${codes('upload_too_slow')}: the body brought less than \`UPLOAD_MIN_RATE\` bytes per second over \`UPLOAD_RATE_WINDOW\` seconds; the connection is then closed. A plain upload leaves nothing; a resumable one keeps what arrived.`,
  {},
  false,
);
/** A JSON body too slow (issue 50), on every operation that reads one. */
export const bodyTimeout = error(
  `${codes('body_timeout')}: the JSON body was not all received within \`BODY_TIMEOUT\` seconds (default 10) of the server starting to read it; the connection is then closed.`,
);
export const uploadTooMany = error(
  `${codes('too_many_uploads')}: the account already runs its plan's \`concurrent_uploads\` (or, for a plan that sets none, \`ACCOUNT_UPLOAD_CONCURRENCY\`) on all instances; with \`Retry-After\`. Also ${codes('rate_limited')} or ${codes('too_many_failures')} as on every request.`,
  { 'Retry-After': ref('headers', 'Retry-After') },
);

export const success = (description: string, schema: Schema): Response => ({ description, headers: rateHeaders, content: json(schema) });

/** The six fields of a file record; the upload response reuses four of them. */
export const fileFields = (publicUrl: string) => ({
  file_id: { type: 'integer', minimum: 1, description: 'Identifier of the file; used in paths.' },
  filename: { type: 'string', minLength: 1, maxLength: 255, description: 'Name of the uploaded file (last path segment, NFC, at most 255 bytes of UTF-8).' },
  size: bytes('Size of the file'),
  upload_date: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$', description: 'Upload time in UTC, `YYYY-MM-DD HH:MM:SS`.', examples: ['2026-11-21 23:24:04'] },
  download_count: count('Completed whole-file downloads.'),
  public_link: { type: 'string', format: 'uri', pattern: `^${escapeRegExp(publicUrl)}/download/[A-Za-z0-9_-]+$`, description: 'Public download URL (the file\'s primary link); the link is the credential.' },
  expires_at: optionalDate('When the file expires (the upload\'s `expires_in`): from then on every link to it answers 410 `link_expired`, and the sweeper deletes it. Null: it never expires.'),
  request_id: { type: ['string', 'null'], description: 'The file request it came through (`/requests/{request_id}`); null for the account\'s own uploads.' },
}) satisfies Record<string, Schema>;

/** A spec date (UTC) or null. */
export const optionalDate = (description: string): Schema => ({
  type: ['string', 'null'],
  pattern: '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$',
  description: `${description} \`YYYY-MM-DD HH:MM:SS\`, UTC.`,
  examples: ['2026-12-01 08:00:00', null],
});

/** The upload options (multipart fields, tus Upload-Metadata keys), as schemas. */
export const uploadOptionFields = {
  expires_in: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'Seconds until the file expires (410 `link_expired` on every link, then deleted by the sweeper). Bad: 400 `invalid_expires_in`.' },
  max_downloads: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'Complete downloads the primary link serves (a byte budget of `max_downloads` x size; ranges count their bytes). Bad: 400 `invalid_max_downloads`.' },
  password: { type: 'string', minLength: 1, maxLength: 256, description: 'The primary link asks for it with HTTP Basic authentication (any user name); stored only as a salted scrypt hash. Bad: 400 `invalid_password`.' },
} satisfies Record<string, Schema>;
