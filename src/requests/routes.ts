// The account's file requests (issue 45): create, list, get (with the files
// received), close. Under /api/v1, behind the same guard as every route.
// The outsider's side is request-link-routes.ts.
import Router from '@koa/router';
import { z } from 'zod';
import { normalName, unshowable } from '../files/filename.js';
import { MAX_OPTION_INT, MAX_PASSWORD_LENGTH } from '../files/upload-options.js';
import { requestErrors } from './errors.js';
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

/** The most files one request may ask for. */
export const MAX_REQUEST_FILES = 10_000;

/** The most characters (code points) of a title. */
export const MAX_TITLE_LENGTH = 200;

/**
 * A title is shown to outsiders on the upload page and to the owner in every
 * listing, as a filename is: the filename rules apply (src/files/filename.ts:
 * no control, bidirectional or invisible characters, not blank), so NUL (a
 * 500 from PostgreSQL before), U+202E and CR/LF are refused with 400.
 */
const title = z
  .string()
  .transform(normalName)
  .superRefine((text, ctx) => {
    const problem = unshowable(text, 'the title') ?? ([...text].length > MAX_TITLE_LENGTH ? `longer than ${MAX_TITLE_LENGTH} characters` : undefined);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const newRequest = z.strictObject({
  title: title.optional(),
  // null: explicitly no limit; absent: the default (service.ts, REQUEST_DEFAULTS).
  max_files: z.number().int().min(1).max(MAX_REQUEST_FILES).nullable().optional(),
  max_file_size: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  expires_in: z.number().int().min(1).max(MAX_OPTION_INT).nullable().optional(),
  password: z.string().min(1).refine((p) => [...p].length <= MAX_PASSWORD_LENGTH).optional(),
});

function parseNewRequest(body: unknown): NewFileRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw requestErrors.invalid('the body must be a JSON object');
  const result = newRequest.safeParse(body);
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

export const presentRequest = (request: FileRequest, publicUrl: string) => ({
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
