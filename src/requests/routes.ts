// The account's file requests (issue 45): create, list, get (with the files
// received), close. Under /api/v1, behind the same guard as every route.
// The outsider's side is link-routes.ts. The body's schema and the
// answer's are schemas.ts's, which the OpenAPI document states.
import Router from '@koa/router';
import { MAX_OPTION_INT, MAX_PASSWORD_LENGTH } from '../files/upload-options.js';
import { requestErrors } from './errors.js';
import { MAX_REQUEST_FILES, MAX_TITLE_LENGTH, newRequestSchema, type FileRequestAnswer } from './schemas.js';
import type { FileRequest, FileRequests, NewFileRequest } from './service.js';
import type { AuthState } from '../http/auth.js';
import type { Need } from '../http/scoped.js';
import { jsonBody } from '../http/json-body.js';
import { pagination, parseListQuery } from '../http/list-query.js';
import { formatDate, formatOptionalDate } from '../wire-date.js';
import { presentFile } from '../files/present.js';

export interface RequestRouteDeps {
  requests: FileRequests;
  publicUrl: string;
  /** BODY_TIMEOUT in milliseconds. */
  bodyTimeoutMs: number;
}

function parseNewRequest(body: unknown): NewFileRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw requestErrors.invalid('the body must be a JSON object');
  const result = newRequestSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    if (issue.code === 'unrecognized_keys') throw requestErrors.invalid(`unknown field "${issue.keys[0]!.slice(0, 64)}"`);
    const field = String(issue.path[0] ?? '');
    if (field === 'title' && issue.code === 'custom') throw requestErrors.invalid(`title: ${issue.message}`);
    const wanted: Record<string, string> = {
      title: `a string of 1 to ${MAX_TITLE_LENGTH} characters`,
      max_files: `an integer from 1 to ${MAX_REQUEST_FILES}, or null for no limit`,
      max_file_size: 'a positive integer (bytes)',
      expires_in: `an integer from 1 to ${MAX_OPTION_INT} (seconds), or null for never`,
      password: `a string of 1 to ${MAX_PASSWORD_LENGTH} characters`,
    };
    throw requestErrors.invalid(`${field} must be ${wanted[field] ?? 'valid'}`);
  }
  const { title, max_files: maxFiles, max_file_size: maxFileSize, expires_in: expiresIn, password } = result.data;
  return { title, maxFiles, maxFileSize, expiresIn, password };
}

/** The upload link of a request: PUBLIC_URL/r/<token>. */
export const uploadLink = (publicUrl: string, token: string) => `${publicUrl}/r/${token}`;

export const presentRequest = (request: FileRequest, publicUrl: string): FileRequestAnswer => ({
  request_id: request.id,
  title: request.title,
  upload_link: uploadLink(publicUrl, request.token),
  max_files: request.maxFiles,
  max_file_size: request.maxFileSize,
  expires_at: formatOptionalDate(request.expiresAt),
  files_received: request.filesReceived,
  uploads_in_progress: request.uploadsInProgress,
  bytes_held: request.bytesHeld,
  has_password: request.hasPassword,
  created_at: formatDate(request.createdAt),
});

/** The owner's file requests, mounted at /api/v1/requests. */
export function requestRoutes(need: Need, { requests, publicUrl, bodyTimeoutMs }: RequestRouteDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const body = jsonBody({ limit: '16kb', invalid: () => requestErrors.invalid('the body must be a JSON object'), timeoutMs: bodyTimeoutMs });
  router.post('/', need('requests:write'), body, async (ctx) => {
    const request = await requests.create(ctx.state.caller.accountId, parseNewRequest(ctx.request.body), requests.clock(), ctx.state.caller.actor);
    ctx.status = 201;
    ctx.body = { success: true, request: presentRequest(request, publicUrl) };
  });

  router.get('/', need('requests:write'), async (ctx) => {
    const { page, limit } = parseListQuery(ctx.query);
    const { requests: rows, total } = await requests.list(ctx.state.caller.accountId, page, limit);
    ctx.body = { success: true, requests: rows.map((r) => presentRequest(r, publicUrl)), pagination: pagination(page, limit, total) };
  });

  router.get('/:id', need('requests:write'), async (ctx) => {
    const { request, files } = await requests.get(ctx.state.caller.accountId, ctx.params.id!);
    ctx.body = { success: true, request: presentRequest(request, publicUrl), files: files.map((f) => presentFile(f, publicUrl)) };
  });

  router.delete('/:id', need('requests:write'), async (ctx) => {
    const ended = await requests.close(ctx.state.caller.accountId, ctx.params.id!, requests.clock(), ctx.state.caller.actor);
    ctx.body = { success: true, message: `File request closed; the files it received stay${ended ? `, and its ${ended} upload${ended === 1 ? '' : 's'} in progress ended` : ''}` };
  });
  return router;
}
