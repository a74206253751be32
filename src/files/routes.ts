// The account's files (GET /api/v1/files, GET and DELETE /api/v1/files/{id},
// mounted at /api/v1/files) and its statistics and limits (GET
// /api/v1/stats). Uploads are the transports' routes (src/uploads,
// src/tus); a file's links are link-routes.ts.
import Router from '@koa/router';
import type { AuthState } from '../http/auth.js';
import { pagination, parseListQuery } from '../http/list-query.js';
import type { Need } from '../http/scoped.js';
import type { ConcurrencySlots } from '../limits/concurrent-uploads.js';
import { parseFileId } from './file-id.js';
import { presentFile } from './present.js';
import type { FileService } from './service.js';

export interface FileRouteDeps {
  files: FileService;
  publicUrl: string;
}

/** The account's files, mounted at /api/v1/files. */
export function fileRoutes(need: Need, { files, publicUrl }: FileRouteDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  router.get('/', need('files:read'), async (ctx) => {
    const { page, limit } = parseListQuery(ctx.query);
    // The items come as JSON text from the database (FileService.pageJson): passed through, not parsed.
    const { filesJson, total } = await files.pageJson(ctx.state.caller.accountId, page, limit, publicUrl);
    ctx.type = 'json';
    ctx.body = `{"success":true,"files":${filesJson},"pagination":${JSON.stringify(pagination(page, limit, total))}}`;
  });

  router.get('/:id', need('files:read'), async (ctx) => {
    const file = await files.get(ctx.state.caller.accountId, parseFileId(ctx.params.id!));
    ctx.body = { success: true, file: presentFile(file, publicUrl) };
  });

  router.delete('/:id', need('files:delete'), async (ctx) => {
    await files.delete(ctx.state.caller.accountId, parseFileId(ctx.params.id!), ctx.state.caller.actor);
    ctx.body = { success: true, message: 'File deleted successfully' };
  });
  return router;
}

/** GET /api/v1/stats: the account's files and bytes, and the limits of its plan that apply. */
export function statsRoutes(need: Need, { files, concurrencySlots }: { files: FileService; concurrencySlots: ConcurrencySlots }): Router<AuthState> {
  const router = new Router<AuthState>();
  router.get('/stats', need('stats:read'), async (ctx) => {
    const { accountId, plan } = ctx.state.caller;
    const stats = await files.stats(accountId);
    ctx.body = {
      success: true,
      // reserved_size beside the spec's two: what uploads in progress hold against max_total_size (docs/decisions.md).
      stats: { total_files: stats.totalFiles, total_size: stats.totalSize, reserved_size: stats.reservedSize },
      limits: {
        max_file_size: plan.maxFileSize,
        daily_uploads: plan.dailyUploads,
        // What applies: a plan without its own cap has the instance default.
        concurrent_uploads: concurrencySlots.limitOf(plan.concurrentUploads),
        max_total_size: plan.maxTotalSize,
        max_expires_in: plan.maxExpiresIn,
      },
      plan: plan.name.toLowerCase(),
    };
  });
  return router;
}
