// GET /api/v1/uploads, not tus (issue 38): the account's unfinished
// resumable uploads, paged as the files list is. They hold daily slots and
// storage room until they finish, expire or are terminated (DELETE), so the
// owner must be able to find them. Registered by tus-routes.ts.
import type { RouterContext } from '@koa/router';
import type { ResumableUploads } from './uploads.js';
import type { AuthState } from '../http/auth.js';
import { pagination, parseListQuery } from '../http/list-query.js';
import { formatDate } from '../wire-date.js';

/** Answers with a page of the caller's unfinished uploads; `base` is the path upload URLs start with (as in Location). */
export async function listUploads(resumable: ResumableUploads, base: string, ctx: RouterContext<AuthState>): Promise<void> {
  const { page, limit } = parseListQuery(ctx.query);
  const { uploads, total } = await resumable.unfinished(ctx.state.caller, page, limit);
  ctx.set('Cache-Control', 'no-store');
  ctx.body = {
    success: true,
    uploads: uploads.map((upload) => ({
      upload_id: upload.id,
      url: `${base}/${upload.id}`,
      filename: upload.filename,
      offset: upload.offset,
      length: upload.length ?? null,
      expires_at: formatDate(upload.expiresAt),
    })),
    pagination: pagination(page, limit, total),
  };
}
