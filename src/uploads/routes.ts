// The plain (multipart) upload's routes: the owner's, with an API key
// (POST /api/v1/files/upload), and an outsider's through a file request's
// link (POST /r/{token}/files, behind the link's guard). Both run the same
// upload (receive.ts); they differ in the options a client may set and in
// what they answer.
import Router from '@koa/router';
import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import { presentUpload } from '../files/present.js';
import { parseUploadOptions, withRetention } from '../files/upload-options.js';
import type { AuthState } from '../http/auth.js';
import { unscoped, type Need } from '../http/scoped.js';
import type { LiveRequestUploads } from '../requests/live-uploads.js';
import type { RequestLinkState } from '../requests/service.js';
import { receivePlainUpload, type PlainUploadDeps } from './receive.js';

export interface UploadRouteDeps extends PlainUploadDeps {
  publicUrl: string;
}

/** POST /api/v1/files/upload: mounted at /api/v1/files, before the routes of /files/{id}. */
export function uploadRoutes(need: Need, deps: UploadRouteDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  router.post('/upload', need('files:write'), async (ctx) => {
    const { caller } = ctx.state;
    const file = await receivePlainUpload(ctx.req, caller, deps, {
      options: (fields) => withRetention(parseUploadOptions(fields), caller.plan.maxExpiresIn),
    });
    ctx.status = 201;
    ctx.body = presentUpload(file, deps.publicUrl);
  });
  // The upload path is never a file id: any other method there is 405, before the key is checked.
  router.all('/upload', unscoped('405 before the key is checked'), (ctx, next) => {
    if (ctx.method === 'POST') return next();
    throw new AppError('method_not_allowed', 'Method not allowed', { Allow: 'POST' });
  });
  return router;
}

export interface RequestUploadRouteDeps extends PlainUploadDeps {
  /** Uploads in flight through requests, cut when their request is closed or expires, or at their deadline. */
  live: LiveRequestUploads;
  /** REQUEST_UPLOAD_EXPIRY: seconds an upload through a request may take. */
  uploadExpirySeconds: number;
}

/** POST /r/{token}/files: mounted on the request link's router, behind its `guard`. */
export function requestUploadRoutes(guard: Middleware<RequestLinkState>, deps: RequestUploadRouteDeps): Router<RequestLinkState> {
  const { live, uploadExpirySeconds } = deps;
  const router = new Router<RequestLinkState>();
  router.post('/files', guard, async (ctx) => {
    const { caller, fileRequest } = ctx.state;
    // Cut when the request is closed or expires, or at REQUEST_UPLOAD_EXPIRY (410 upload_expired).
    const tracked = live.track(fileRequest.id, { requestExpiresAt: fileRequest.expiresAt, uploadDeadline: new Date(Date.now() + uploadExpirySeconds * 1000) });
    let file;
    try {
      file = await receivePlainUpload(ctx.req, caller, deps, {
        // The outsider's fields (expires_in, password, ...) are not theirs to set on the owner's file: the plan's retention applies.
        options: () => withRetention({}, caller.plan.maxExpiresIn),
        // The place before the first byte (the intake's open): a full request reads no body.
        requestId: fileRequest.id,
        stop: tracked.signal,
      });
    } finally {
      tracked.done();
    }
    ctx.status = 201;
    // A receipt: no file id, no download link (those are the owner's).
    ctx.body = { success: true, filename: file.filename, size: file.size };
  });
  return router;
}
