// What every part of the OpenAPI description (document.ts and the files
// beside it) builds with: the document's types, the Error schema, and the
// responses many operations share. Every part imports it; it imports none.
//
// The document is written in zod-openapi's input form: a plain OpenAPI 3.1
// object in which any schema may be a zod schema. The request and answer
// schemas are the ones the routes validate with and the presenters are typed
// by (src/*/schemas.ts, src/wire-schemas.ts); what zod cannot say (which
// error codes an operation answers, headers, security) is written here.
import { z } from 'zod';
import { ERROR_CODE_NAMES, ERROR_CODES, type ErrorCode } from '../error-codes.js';
import { fileSchema, uploadAnswerSchema } from '../files/schemas.js';
import { linkSchema } from '../links/schemas.js';
import { fileRequestSchema } from '../requests/schemas.js';

/** A JSON Schema (2020-12, the OpenAPI 3.1 dialect), kept loose on purpose. */
export type Schema = { [keyword: string]: unknown };
/** Where the document takes a schema: a zod schema (rendered by zod-openapi) or JSON Schema as written. */
export type AnySchema = Schema | z.ZodType;
export type Ref = { $ref: string };
export interface Header { description: string; schema: Schema }
export interface Parameter { name: string; in: 'path' | 'query' | 'header'; required?: boolean; description: string; schema: Schema }
/** zod objects whose fields are parameters (each field's `.meta({ param })` names and describes it): zod-openapi's input form. */
export interface RequestParams { path?: z.ZodObject; query?: z.ZodObject }
export interface MediaType { schema?: AnySchema; encoding?: Record<string, { contentType: string }> }
export interface Response { description: string; headers?: Record<string, Ref>; content?: Record<string, MediaType> }
export interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Array<Record<string, string[]>>;
  parameters?: Array<Parameter | Ref>;
  requestParams?: RequestParams;
  requestBody?: { required: boolean; content: Record<string, MediaType> };
  responses: Record<string, Response | Ref>;
}
export interface PathItem {
  servers?: Array<{ url: string; description?: string }>;
  parameters?: Array<Parameter | Ref | z.ZodType>;
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

/** The document as written here (zod-openapi's input): its component schemas and parameters may be zod schemas. */
export type DocumentInput = Omit<OpenApiDocument, 'components'> & {
  components: Omit<OpenApiDocument['components'], 'schemas' | 'parameters'> & { schemas: Record<string, AnySchema>; parameters: Record<string, Parameter | z.ZodType> };
};

/** The answers' schemas of one document: each built once, so that every use of one becomes a $ref to its component. */
export function answerSchemas(publicUrl: string) {
  return { file: fileSchema(publicUrl), link: linkSchema(publicUrl), request: fileRequestSchema(publicUrl), upload: uploadAnswerSchema(publicUrl) };
}
export type AnswerSchemas = ReturnType<typeof answerSchemas>;

export const ref = (kind: keyof OpenApiDocument['components'], name: string): Ref => ({ $ref: `#/components/${kind}/${name}` });
export const json = (schema: AnySchema) => ({ 'application/json': { schema } });
export const object = (properties: Record<string, Schema>, description?: string): Schema => ({
  type: 'object',
  ...(description ? { description } : {}),
  required: Object.keys(properties),
  additionalProperties: false,
  properties,
});
export const codes = (...names: ErrorCode[]) => names.map((c) => `\`${c}\``).join(', ');

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

export const success = (description: string, schema: AnySchema): Response => ({ description, headers: rateHeaders, content: json(schema) });

/** The upload options (multipart fields, tus Upload-Metadata keys), as schemas. */
export const uploadOptionFields = {
  expires_in: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'Seconds until the file expires (410 `link_expired` on every link, then deleted by the sweeper). Bad: 400 `invalid_expires_in`.' },
  max_downloads: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'Complete downloads the primary link serves (a byte budget of `max_downloads` x size; ranges count their bytes). Bad: 400 `invalid_max_downloads`.' },
  password: { type: 'string', minLength: 1, maxLength: 256, description: 'The primary link asks for it with HTTP Basic authentication (any user name); stored only as a salted scrypt hash. Bad: 400 `invalid_password`.' },
} satisfies Record<string, Schema>;

/** Every registered code with its status and meaning, by status: a Markdown list. */
const codeList = () =>
  [...ERROR_CODE_NAMES]
    .sort((a, b) => ERROR_CODES[a].status - ERROR_CODES[b].status)
    .map((code) => `- ${ERROR_CODES[code].status} ${codes(code)}: ${ERROR_CODES[code].meaning}`)
    .join('\n');

/** Every error response (src/errors.ts renders it); its codes are src/error-codes.ts's. */
export const errorSchema = () =>
  z
    .strictObject({
      success: z.literal(false),
      error: z.strictObject({
        code: z.enum(ERROR_CODE_NAMES).meta({
          pattern: '^[a-z_]+$',
          description: `Stable, machine-readable. A later version may add codes: treat one you do not know by its HTTP status.\n\n${codeList()}`,
        }),
        message: z.string().meta({ description: 'For people; may change at any time.' }),
      }),
    })
    .meta({ description: 'Every error response. No stack trace or database text ever appears in it.' });
