// The routes of uploads straight to the store (docs/direct-uploads.md): the
// owner's under /api/v1/uploads/direct, with an API key, and an outsider's
// under /r/{token}/uploads/direct, behind the file request link's guard
// (requestDirectScope). Both run the same service (uploads.ts); they differ
// in which uploads a caller reaches, the options a client may set, and
// what complete answers.
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { z } from 'zod';
import type { Scope } from '../accounts/scopes.js';
import { cleanFilename } from '../files/filename.js';
import { presentUpload } from '../files/present.js';
import { parseUploadOptions, withRetention, type UploadOptions } from '../files/upload-options.js';
import type { AuthState } from '../http/auth.js';
import type { Metrics } from '../metrics.js';
import { jsonBody } from '../http/json-body.js';
import type { FileRequest, RequestLinkState } from '../requests/service.js';
import { formatDate } from '../wire-date.js';
import { directErrors } from './errors.js';
import { completeSchema, newDirectSchema, signSchema, type DirectInfoAnswer, type DirectUploadAnswer, type PartUrlsAnswer } from './schemas.js';
import { DEFAULT_PART_SIZE } from './part-plan.js';
import type { DirectScope } from './records.js';
import type { DirectUploads, DirectView } from './uploads.js';

export interface DirectRouteDeps {
  direct: DirectUploads;
  publicUrl: string;
  /** BODY_TIMEOUT in milliseconds. */
  bodyTimeoutMs: number;
  /** A completed upload's bytes count as every transport's do (dropstream_uploaded_bytes_total). */
  metrics?: Metrics;
}

/** How the file request link's routes differ from the owner's. */
export interface RequestDirectScope {
  /** REQUEST_UPLOAD_EXPIRY: seconds an upload through a request may take, from its creation to its file. */
  uploadExpirySeconds: number;
  now: () => Date;
}

/** The file request a route runs through: the link's guard put it in the state (src/requests/link-routes.ts); none on the owner's side. */
const requestOf = (ctx: Context) => (ctx.state as Partial<RequestLinkState>).fileRequest as FileRequest | undefined;

function parse<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') throw directErrors.invalid(`unknown field "${issue.keys[0]!.slice(0, 64)}"`);
  throw directErrors.invalid(`${issue.path.join('.') || 'the body'}: ${issue.message}`);
}

const presentView = ({ row, plan, urls, stored }: DirectView): DirectUploadAnswer => ({
  success: true,
  upload_id: row.id,
  filename: row.filename,
  size: row.size,
  part_size: plan.partSize,
  parts: plan.parts,
  expires_at: formatDate(row.expiresAt),
  ...(urls ? { part_urls: presentUrls(urls).part_urls, url_expires_at: formatDate(urls.expiresAt) } : {}),
  ...(stored ? { parts_stored: stored.map((p) => ({ part_number: p.partNumber, size: p.size, etag: p.etag })) } : {}),
});

const presentUrls = (urls: NonNullable<DirectView['urls']>): PartUrlsAnswer => ({
  success: true,
  part_urls: urls.parts.map((p) => ({ part_number: p.partNumber, size: p.size, url: p.url })),
  url_expires_at: formatDate(urls.expiresAt),
});

/**
 * The routes, each behind `guard('files:write')`: the key's scope on the
 * owner's side, the request link's guard on the outsider's (`request`).
 */
export function directRoutes(guard: (scope: Scope) => Middleware<AuthState>, deps: DirectRouteDeps, request?: RequestDirectScope): Router<AuthState> {
  const { direct, publicUrl, bodyTimeoutMs, metrics } = deps;
  const router = new Router<AuthState>();
  const body = jsonBody({ limit: '1mb', invalid: () => directErrors.invalid('the body must be a JSON object'), timeoutMs: bodyTimeoutMs });
  const guarded = guard('files:write');
  const scopeOf = (ctx: Context): DirectScope => ({ accountId: ctx.state.caller.accountId, requestId: requestOf(ctx)?.id });

  router.get('/direct', guarded, (ctx) => {
    const { limits, urlSeconds, expirySeconds } = direct.describe();
    const answer: DirectInfoAnswer = {
      success: true,
      part_size: DEFAULT_PART_SIZE,
      min_part_size: limits.minPartSize,
      max_part_size: limits.maxPartSize,
      max_parts: limits.maxParts,
      url_seconds: urlSeconds,
      expiry_seconds: request ? Math.min(expirySeconds, request.uploadExpirySeconds) : expirySeconds,
    };
    ctx.body = answer;
  });

  router.post('/direct', guarded, body, async (ctx) => {
    // Off before the body's rules: a client on a server without them learns that first.
    void direct.store;
    const { caller } = ctx.state;
    const fileRequest = requestOf(ctx);
    // The options first, by the checks every upload's and link's go through:
    // a bad one answers its own code (invalid_expires_in, ...), as there.
    // The outsider's are not theirs to set on the owner's file: the plan's retention applies.
    const given = (ctx.request.body ?? {}) as Record<string, unknown>;
    const options: UploadOptions = withRetention(fileRequest ? {} : parseUploadOptions(given, 'json'), caller.plan.maxExpiresIn);
    const input = parse(newDirectSchema, ctx.request.body);
    const deadline =
      fileRequest && request
        ? new Date(Math.min(request.now().getTime() + request.uploadExpirySeconds * 1000, fileRequest.expiresAt?.getTime() ?? Infinity))
        : undefined;
    const view = await direct.create(
      caller,
      { filename: cleanFilename(input.filename), size: input.size, partSize: input.part_size, sha256: input.sha256?.toLowerCase(), options },
      { requestId: fileRequest?.id, deadline },
    );
    ctx.status = 201;
    ctx.body = presentView(view);
  });

  router.post('/direct/:id/parts', guarded, body, async (ctx) => {
    const { part_numbers: numbers } = parse(signSchema, ctx.request.body);
    const view = await direct.sign(scopeOf(ctx), ctx.params.id!, numbers);
    ctx.body = presentUrls(view.urls!);
  });

  router.get('/direct/:id', guarded, async (ctx) => {
    ctx.body = presentView(await direct.view(scopeOf(ctx), ctx.params.id!));
  });

  router.post('/direct/:id/complete', guarded, body, async (ctx) => {
    const { parts } = parse(completeSchema, ctx.request.body);
    const file = await direct.complete(
      scopeOf(ctx),
      ctx.params.id!,
      parts.map((p) => ({ partNumber: p.part_number, etag: p.etag })),
      ctx.state.caller.actor,
    );
    metrics?.uploadedBytes.inc(file.size);
    ctx.status = 201;
    // Through a request, a receipt: no file id, no download link (those are the owner's).
    ctx.body = requestOf(ctx) ? { success: true, filename: file.filename, size: file.size } : presentUpload(file, publicUrl);
  });

  router.delete('/direct/:id', guarded, async (ctx) => {
    await direct.abort(scopeOf(ctx), ctx.params.id!);
    ctx.body = { success: true, message: 'The upload was aborted; nothing of it is kept' };
  });
  return router;
}
