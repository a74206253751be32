// tus through a file request's link (/r/{token}/uploads): the same routes as
// /api/v1/uploads (routes.ts), with the request's scope. The link's guard has
// put the owner as the caller and the request in the state
// (src/requests/link-routes.ts).
import { AppError } from '../errors.js';
import type { LiveRequestUploads } from '../requests/live-uploads.js';
import type { FileRequest, FileRequests, RequestLinkState } from '../requests/service.js';
import type { TusScope } from './routes.js';

export interface RequestScopeDeps {
  requests: FileRequests;
  /** Uploads in flight through requests, cut when their request is closed or expires. */
  live: LiveRequestUploads;
  /** REQUEST_UPLOAD_EXPIRY: seconds an upload through a request may take, from its creation to its file. */
  uploadExpirySeconds: number;
  publicUrl: string;
}

/** The latest an upload through `request` starting now may end: REQUEST_UPLOAD_EXPIRY from now, never past the request's expiry. */
const requestUploadDeadline = (request: FileRequest, uploadExpirySeconds: number, now: Date) =>
  new Date(Math.min(now.getTime() + uploadExpirySeconds * 1000, request.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY));

export function requestTusScope({ requests, live, uploadExpirySeconds, publicUrl }: RequestScopeDeps): TusScope {
  const basePath = new URL(publicUrl).pathname.replace(/\/+$/, '');
  const requestOf = (ctx: { state: unknown }) => (ctx.state as RequestLinkState).fileRequest;
  return {
    base: (ctx) => `${basePath}/r/${requestOf(ctx).token}/uploads`,
    // The place is taken as the upload opens, before its store state exists (the intake's open).
    requestId: (ctx) => requestOf(ctx).id,
    owns: async (ctx, id) => {
      if (!(await requests.ownsUpload(requestOf(ctx).id, id))) throw new AppError('upload_not_found', 'No such upload through this file request');
    },
    // Its place, slot and bytes are held REQUEST_UPLOAD_EXPIRY at most, however often it is written (src/tus/uploads.ts cuts a PATCH then).
    deadline: (ctx) => requestUploadDeadline(requestOf(ctx), uploadExpirySeconds, requests.clock()),
    // The upload's own deadline covers the request's expiry: tracked for the close (and, as a backstop, the expiry).
    track: (ctx) => live.track(requestOf(ctx).id),
  };
}
