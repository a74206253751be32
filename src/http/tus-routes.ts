// tus 1.0.0 under /api/v1/uploads: core protocol, creation,
// creation-with-upload, creation-defer-length, termination, expiration and
// checksum (sha256). Every request passes the same guard as the rest of the
// API (key, plan, per-minute and per-day counting); every error is our JSON
// shape. The work is in src/files/resumable.ts; this file only speaks HTTP.
import type Router from '@koa/router';
import type { RouterContext } from '@koa/router';
import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import type { ResumableUploads, UploadStatus } from '../files/resumable.js';
import { resumableErrors } from '../files/resumable-errors.js';
import { UPLOAD_ID } from '../files/resumable-records.js';
import type { UploadGate } from '../files/upload-gate.js';
import type { Metrics } from '../metrics.js';
import type { AuthState } from './auth.js';
import { formatDate, presentFile } from './present.js';
import {
  checkTusVersion,
  parseChecksum,
  parseLength,
  parseMetadata,
  parseOffset,
  statusHeaders,
  TUS_CONTENT_TYPE,
  TUS_EXTENSIONS,
  TUS_VERSION,
} from './tus-headers.js';

export interface TusDeps {
  resumable: ResumableUploads;
  uploadGate: UploadGate;
  metrics?: Metrics;
  /** Base of public links and of upload URLs, without a trailing slash. */
  publicUrl: string;
}

type Ctx = RouterContext<AuthState>;

/** Tus-Resumable on every answer, refusals by the guard too (errors.ts keeps tus- headers on errors). */
const tusHeader: Middleware<AuthState> = async (ctx, next) => {
  ctx.set('Tus-Resumable', TUS_VERSION);
  await next();
};

/** The protocol version, checked on all but OPTIONS and our JSON GET. */
const tusVersion: Middleware<AuthState> = async (ctx, next) => {
  if (ctx.method !== 'OPTIONS' && ctx.method !== 'GET') checkTusVersion(ctx.get('Tus-Resumable'));
  await next();
};

function uploadId(ctx: Ctx): string {
  const id = ctx.params.id ?? '';
  if (!UPLOAD_ID.test(id)) throw resumableErrors.notFound();
  return id;
}

/** Content-Length as a number, when the client sent one. */
function bodySize(ctx: Ctx): number | undefined {
  const value = ctx.get('Content-Length');
  return /^[0-9]{1,16}$/.test(value) ? Number(value) : undefined;
}

const hasBody = (ctx: Ctx) => (bodySize(ctx) ?? (ctx.get('Transfer-Encoding') ? 1 : 0)) > 0;

/** Adds the tus routes to the API router, each behind `guard` (api-routes.ts: the same apiGuard as every API route). */
export function tusRoutes(router: Router<AuthState>, guard: Middleware<AuthState>, deps: TusDeps): void {
  const { resumable, uploadGate, metrics, publicUrl } = deps;
  // Upload URLs are relative to PUBLIC_URL's path, so they work through any
  // host name or proxy the client came by.
  const base = `${new URL(publicUrl).pathname.replace(/\/+$/, '')}/api/v1/uploads`;
  const guarded = [tusHeader, guard, tusVersion] as const;

  /** Streams the request body into the upload; counts it in the metrics. */
  async function receive(ctx: Ctx, id: string, offset: number, length?: number, leave = uploadGate.enter()) {
    metrics?.resumableInFlight.inc();
    try {
      const outcome = await resumable.append(ctx.state.caller, id, {
        offset,
        length,
        bodySize: bodySize(ctx),
        body: ctx.req,
        checksum: parseChecksum(ctx.get('Upload-Checksum')),
      });
      metrics?.resumableReceivedBytes.inc(outcome.received);
      if (outcome.resumedAt !== undefined) metrics?.resumedBytes.inc(outcome.resumedAt);
      if (outcome.status.file) metrics?.uploadedBytes.inc(outcome.status.file.size);
      return outcome.status;
    } catch (err) {
      if (err instanceof AppError && err.code === 'upload_aborted') metrics?.resumableInterruptions.inc();
      throw err;
    } finally {
      metrics?.resumableInFlight.dec();
      leave();
    }
  }

  const answer = (ctx: Ctx, status: number, upload: UploadStatus) => {
    ctx.status = status;
    ctx.set(statusHeaders(upload, publicUrl));
  };

  router.options('/uploads', ...guarded, (ctx) => {
    ctx.status = 204;
    ctx.set({
      'Tus-Version': TUS_VERSION,
      'Tus-Extension': TUS_EXTENSIONS,
      'Tus-Max-Size': String(resumable.maxSize(ctx.state.caller)),
      'Tus-Checksum-Algorithm': 'sha256',
    });
  });

  router.post('/uploads', ...guarded, async (ctx) => {
    const length = ctx.get('Upload-Length');
    const deferred = ctx.get('Upload-Defer-Length');
    if ((length === '') === (deferred === '') || (deferred !== '' && deferred !== '1')) {
      throw new AppError(400, 'invalid_upload_length', 'Send either Upload-Length or Upload-Defer-Length: 1');
    }
    const rawFilename = parseMetadata(ctx.get('Upload-Metadata')).get('filename')?.toString('utf8') ?? '';
    const withBody = ctx.get('Content-Type') === TUS_CONTENT_TYPE && hasBody(ctx);
    // Before the slot is taken: a body refused with 503 must not leave an upload behind.
    const leave = withBody ? uploadGate.enter() : undefined;
    let created: UploadStatus;
    try {
      created = await resumable.create(ctx.state.caller, { length: length === '' ? undefined : parseLength(length), rawFilename });
    } catch (err) {
      leave?.();
      throw err;
    }
    metrics?.resumableCreated.inc();
    ctx.set('Location', `${base}/${created.id}`);
    let upload = created;
    if (leave) {
      try {
        upload = await receive(ctx, created.id, 0, undefined, leave);
      } catch (err) {
        // The upload exists and the client needs its URL to go on, unless it
        // was removed (over the plan's limit).
        if (err instanceof AppError && err.status === 403) throw err;
        if (err instanceof AppError && err.code === 'upload_aborted') {
          // The client left before it could learn the upload's URL, so no
          // one can continue it: terminate it now, giving its daily slot
          // back, rather than let it hold the slot until it expires (which
          // is still what happens if this fails).
          await resumable.terminate(ctx.state.caller, created.id).catch(() => {});
          throw err;
        }
        upload = await resumable.status(ctx.state.caller, created.id);
      }
    }
    answer(ctx, 201, upload);
  });

  // Before GET: @koa/router would otherwise answer HEAD with the GET route.
  router.head('/uploads/:id', ...guarded, async (ctx) => {
    answer(ctx, 200, await resumable.status(ctx.state.caller, uploadId(ctx)));
    ctx.set('Cache-Control', 'no-store');
  });

  router.patch('/uploads/:id', ...guarded, async (ctx) => {
    const id = uploadId(ctx);
    if (ctx.get('Content-Type') !== TUS_CONTENT_TYPE) {
      throw new AppError(415, 'unsupported_media_type', `PATCH bodies must be ${TUS_CONTENT_TYPE}`);
    }
    const offsetHeader = ctx.get('Upload-Offset');
    if (offsetHeader === '') throw new AppError(400, 'invalid_upload_offset', 'Upload-Offset is required');
    const length = ctx.get('Upload-Length');
    answer(ctx, 204, await receive(ctx, id, parseOffset(offsetHeader), length === '' ? undefined : parseLength(length)));
  });

  router.delete('/uploads/:id', ...guarded, async (ctx) => {
    await resumable.terminate(ctx.state.caller, uploadId(ctx));
    ctx.status = 204;
  });

  /** Not tus: the upload as JSON, with the file it became (null until then). */
  router.get('/uploads/:id', ...guarded, async (ctx) => {
    const upload = await resumable.status(ctx.state.caller, uploadId(ctx));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      success: true,
      upload: {
        upload_id: upload.id,
        filename: upload.filename,
        offset: upload.offset,
        length: upload.length ?? null,
        expires_at: upload.file ? null : formatDate(upload.expiresAt),
      },
      file: upload.file ? presentFile(upload.file, publicUrl) : null,
    };
  });
}
