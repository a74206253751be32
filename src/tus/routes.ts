// tus 1.0.0 under /api/v1/uploads: core protocol, creation,
// creation-with-upload, creation-defer-length, termination, expiration and
// checksum (sha256). Every request passes the same guard as the rest of the
// API (key, plan, per-minute and per-day counting); every error is our JSON
// shape. The work is in src/tus/uploads.ts; this file only speaks HTTP.
import type { Scope } from '../accounts/scopes.js';
import Router, { type RouterContext } from '@koa/router';
import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import type { ResumableUploads, UploadStatus } from './uploads.js';
import { resumableErrors, UploadAborted } from './errors.js';
import { isUploadId } from './records.js';
import type { UploadGate } from '../limits/upload-gate.js';
import { isOptionName, parseUploadOptions, withRetention, type UploadOptions } from '../files/upload-options.js';
import { enterUpload, type ConcurrencySlots } from '../limits/concurrent-uploads.js';
import { FileTooLarge, fileErrors, UploadEnded } from '../files/errors.js';
import { closeAfterAnswer, detachableBody } from '../http/unread-body.js';
import { watchBodyRate, type BodyRateOptions } from '../http/body-rate.js';
import type { Metrics } from '../metrics.js';
import type { AuthState } from '../http/auth.js';
import { formatDate } from '../wire-date.js';
import { presentFile } from '../files/present.js';
import { listUploads } from './upload-list.js';
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
} from './headers.js';

export interface TusDeps {
  resumable: ResumableUploads;
  uploadGate: UploadGate;
  concurrencySlots: ConcurrencySlots;
  bodyRate: BodyRateOptions;
  metrics?: Metrics;
  /** Base of public links and of upload URLs, without a trailing slash. */
  publicUrl: string;
  /** Where else the protocol is served (file requests: /r/{token}/uploads); absent: /api/v1/uploads for the key's account. */
  scope?: TusScope;
}

/**
 * The same protocol for someone uploading on the caller's behalf (a file
 * request, src/requests/link-routes.ts): the guard sets ctx.state.caller
 * to the owner; the scope says where uploads live, which request an upload
 * comes through (the intake takes its place), which uploads the requester may touch, and
 * what it must not be told (options, the file's id and link, the listing).
 */
export interface TusScope {
  /** The upload URLs' path for this request (without a trailing slash). */
  base: (ctx: Ctx) => string;
  /** The file request an upload created now comes through: the intake takes one of its places as the upload opens. */
  requestId: (ctx: Ctx) => string;
  /** Before a HEAD, PATCH or DELETE: throws (404) when `id` is no upload of this scope. */
  owns: (ctx: Ctx, id: string) => Promise<void>;
  /** The latest an upload created now may expire, however often written (a file request's REQUEST_UPLOAD_EXPIRY). */
  deadline?: (ctx: Ctx) => Date | undefined;
  /** While a body streams in: its signal aborts, with the answer as its reason, when the upload must stop (its file request was closed). */
  track?: (ctx: Ctx) => { signal: AbortSignal; done(): void };
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

/** A PATCH that answers before its body ended (it gave way to a newer request) closes its connection: see unread-body.ts. */
const closeUnreadBody: Middleware<AuthState> = async (ctx, next) => {
  await next();
  if (!ctx.req.complete) closeAfterAnswer(ctx.req, ctx.res);
};

function uploadId(ctx: Ctx): string {
  const id = ctx.params.id ?? '';
  if (!isUploadId(id)) throw resumableErrors.notFound();
  return id;
}

/** Content-Length as a number, when the client sent one. */
function bodySize(ctx: Ctx): number | undefined {
  const value = ctx.get('Content-Length');
  return /^[0-9]{1,16}$/.test(value) ? Number(value) : undefined;
}

const hasBody = (ctx: Ctx) => (bodySize(ctx) ?? (ctx.get('Transfer-Encoding') ? 1 : 0)) > 0;

/** What the handlers share: the dependencies and the path upload URLs start with. */
interface Tus extends TusDeps {
  /**
   * Upload URLs are relative to PUBLIC_URL's path, so they work through any
   * host name or proxy the client came by.
   */
  base: string;
}

/** The upload URLs' path of this request: the API's, or the scope's. */
const baseOf = (tus: Tus, ctx: Ctx) => (tus.scope ? tus.scope.base(ctx) : tus.base);

/** The upload id of the path, checked against the scope when there is one. */
async function scopedUploadId(tus: Tus, ctx: Ctx): Promise<string> {
  const id = uploadId(ctx);
  await tus.scope?.owns(ctx, id);
  return id;
}

/**
 * The tus routes, mounted at /api/v1/uploads (and at /r/{token}/uploads with
 * a file request's scope), each behind need('files:write') (src/api.ts: the
 * API guard and the scope; every tus request is part of uploading, so an
 * upload-only key can create, write, resume, list and end its uploads). A
 * file request's link passes its own guard, whatever the scope.
 */
export function tusRoutes(need: (scope: Scope) => Middleware<AuthState>, deps: TusDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const tus: Tus = { ...deps, base: `${new URL(deps.publicUrl).pathname.replace(/\/+$/, '')}/api/v1/uploads` };
  const guarded = [tusHeader, need('files:write'), tusVersion] as const;
  router.options('/', ...guarded, (ctx) => describeServer(tus, ctx));
  router.post('/', closeUnreadBody, ...guarded, (ctx) => createUpload(tus, ctx));
  // Before GET: @koa/router would otherwise answer HEAD with the GET route.
  router.head('/:id', ...guarded, (ctx) => uploadOffset(tus, ctx));
  router.patch('/:id', closeUnreadBody, ...guarded, (ctx) => appendToUpload(tus, ctx));
  router.delete('/:id', ...guarded, (ctx) => terminateUpload(tus, ctx));
  // A scope (a file request) has no JSON view or listing: they show the owner's files and uploads.
  if (deps.scope) return router;
  router.get('/:id', ...guarded, (ctx) => uploadAsJson(tus, ctx));
  router.get('/', ...guarded, (ctx) => listUploads(tus.resumable, tus.base, ctx));
  return router;
}

/** An upload slot (the instance's gate and the account's concurrent uploads), released by calling what it returns. */
const enterSlot = (tus: Tus, ctx: Ctx) => enterUpload(tus.uploadGate, tus.concurrencySlots, ctx.state.caller);

function answer(tus: Tus, ctx: Ctx, status: number, upload: UploadStatus): void {
  ctx.status = status;
  // A scope's requester is not told the file's id or link: only that the upload is complete.
  ctx.set(statusHeaders(tus.scope ? { ...upload, file: undefined } : upload, tus.publicUrl));
}

/** OPTIONS: what this server supports. */
function describeServer(tus: Tus, ctx: Ctx): void {
  ctx.status = 204;
  ctx.set({
    'Tus-Version': TUS_VERSION,
    'Tus-Extension': TUS_EXTENSIONS,
    'Tus-Max-Size': String(tus.resumable.maxSize(ctx.state.caller)),
    'Tus-Checksum-Algorithm': 'sha256',
  });
}

/** What a POST asks to create. */
interface Creation {
  /** The Upload-Length header, '' when the length is deferred; parsed in create() (after the slot is taken, as it always was). */
  lengthHeader: string;
  rawFilename: string;
  /** expires_in, max_downloads and password from Upload-Metadata, checked before anything is taken. */
  options: UploadOptions;
}

/** POST: creates an upload, and with a body (creation-with-upload) streams it in. */
async function createUpload(tus: Tus, ctx: Ctx): Promise<void> {
  const length = ctx.get('Upload-Length');
  const deferred = ctx.get('Upload-Defer-Length');
  if ((length === '') === (deferred === '') || (deferred !== '' && deferred !== '1')) {
    throw new AppError('invalid_upload_length', 'Send either Upload-Length or Upload-Defer-Length: 1');
  }
  const metadata = parseMetadata(ctx.get('Upload-Metadata'));
  const creation: Creation = {
    lengthHeader: length,
    rawFilename: metadata.get('filename')?.toString('utf8') ?? '',
    // A scope's requester does not choose the owner's file options: the plan's retention applies.
    options: withRetention(
      tus.scope ? {} : parseUploadOptions(new Map([...metadata].filter(([key]) => isOptionName(key)).map(([key, value]) => [key, value.toString('utf8')]))),
      ctx.state.caller.plan.maxExpiresIn,
    ),
  };
  const withBody = ctx.get('Content-Type') === TUS_CONTENT_TYPE && hasBody(ctx);
  if (!withBody) {
    answer(tus, ctx, 201, await create(tus, ctx, creation));
    return;
  }
  const first = await createAndReceive(tus, ctx, creation);
  answer(tus, ctx, 201, first.failure === undefined ? first.upload : await afterFailedFirstBody(tus, ctx, first.upload.id, first.failure));
}

/** Creates the upload and tells the client where it is. */
async function create(tus: Tus, ctx: Ctx, creation: Creation): Promise<UploadStatus> {
  const { lengthHeader, rawFilename, options } = creation;
  const created = await tus.resumable.create(ctx.state.caller, {
    length: lengthHeader === '' ? undefined : parseLength(lengthHeader),
    rawFilename,
    options,
    deadline: tus.scope?.deadline?.(ctx),
    requestId: tus.scope?.requestId(ctx),
  });
  tus.metrics?.resumableCreated.inc();
  ctx.set('Location', `${baseOf(tus, ctx)}/${created.id}`);
  return created;
}

/**
 * The upload and its first body, under one slot. The slot is taken before
 * the upload is created: a body refused with 503 or 429 must not leave an
 * upload behind. A failed body still leaves the upload (`failure` says why,
 * and `upload` is the upload as created).
 */
async function createAndReceive(tus: Tus, ctx: Ctx, creation: Creation): Promise<{ upload: UploadStatus; failure?: unknown }> {
  const leave = await enterSlot(tus, ctx);
  try {
    const created = await create(tus, ctx, creation);
    try {
      return { upload: await receive(tus, ctx, created.id, 0) };
    } catch (failure) {
      return { upload: created, failure };
    }
  } finally {
    leave();
  }
}

/** After the first body failed (its slot given back): the upload exists and the client needs its URL to go on, unless it was removed. */
async function afterFailedFirstBody(tus: Tus, ctx: Ctx, id: string, failure: unknown): Promise<UploadStatus> {
  // append removes an upload over the plan's limit, or whose file request ended.
  if (failure instanceof FileTooLarge || failure instanceof UploadEnded) throw failure;
  if (failure instanceof UploadAborted) {
    // The client left before it could learn the upload's URL, so no one
    // can continue it: terminate it now, giving its daily slot back, rather
    // than let it hold the slot until it expires (which is still what
    // happens if this fails).
    await tus.resumable.terminate(ctx.state.caller, id).catch(() => {});
    throw failure;
  }
  return tus.resumable.status(ctx.state.caller, id);
}

/** HEAD: where the upload stands. */
async function uploadOffset(tus: Tus, ctx: Ctx): Promise<void> {
  answer(tus, ctx, 200, await tus.resumable.status(ctx.state.caller, await scopedUploadId(tus, ctx)));
  ctx.set('Cache-Control', 'no-store');
}

/** PATCH: streams the body into the upload at Upload-Offset, under an upload slot. */
async function appendToUpload(tus: Tus, ctx: Ctx): Promise<void> {
  const id = await scopedUploadId(tus, ctx);
  if (ctx.get('Content-Type') !== TUS_CONTENT_TYPE) {
    throw new AppError('unsupported_media_type', `PATCH bodies must be ${TUS_CONTENT_TYPE}`);
  }
  const offsetHeader = ctx.get('Upload-Offset');
  if (offsetHeader === '') throw new AppError('invalid_upload_offset', 'Upload-Offset is required');
  const offset = parseOffset(offsetHeader);
  const length = ctx.get('Upload-Length');
  const declaredLength = length === '' ? undefined : parseLength(length);
  const leave = await enterSlot(tus, ctx);
  let upload: UploadStatus;
  try {
    upload = await receive(tus, ctx, id, offset, declaredLength);
  } finally {
    leave();
  }
  answer(tus, ctx, 204, upload);
}

/**
 * Streams the request body into the upload; counts it in the metrics. The
 * caller holds an upload slot throughout.
 */
async function receive(tus: Tus, ctx: Ctx, id: string, offset: number, length?: number): Promise<UploadStatus> {
  const { resumable, bodyRate, metrics } = tus;
  // A body slower than UPLOAD_MIN_RATE ends with 408; what it delivered is
  // kept, and the client can read the 408 (the body is cut, not the request).
  const body = detachableBody(ctx.req);
  const unwatch = watchBodyRate(ctx.req, bodyRate, () => body.destroy(fileErrors.tooSlow(bodyRate.minRate, bodyRate.windowSeconds)));
  // A scope's upload may be told to stop (its file request closed): the body is cut with the answer, and append removes the upload.
  const tracked = tus.scope?.track?.(ctx);
  const stop = () => body.destroy(tracked!.signal.reason as Error);
  if (tracked?.signal.aborted) stop();
  else tracked?.signal.addEventListener('abort', stop, { once: true });
  metrics?.resumableInFlight.inc();
  try {
    const outcome = await resumable.append(ctx.state.caller, id, {
      offset,
      length,
      bodySize: bodySize(ctx),
      body,
      checksum: parseChecksum(ctx.get('Upload-Checksum')),
    });
    metrics?.resumableReceivedBytes.inc(outcome.received);
    if (outcome.resumedAt !== undefined) metrics?.resumedBytes.inc(outcome.resumedAt);
    if (outcome.status.file) metrics?.uploadedBytes.inc(outcome.status.file.size);
    return outcome.status;
  } catch (err) {
    if (err instanceof UploadAborted) metrics?.resumableInterruptions.inc();
    throw err;
  } finally {
    unwatch();
    tracked?.signal.removeEventListener('abort', stop);
    tracked?.done();
    metrics?.resumableInFlight.dec();
  }
}

/** DELETE: termination. */
async function terminateUpload(tus: Tus, ctx: Ctx): Promise<void> {
  await tus.resumable.terminate(ctx.state.caller, await scopedUploadId(tus, ctx));
  ctx.status = 204;
}

/** GET, not tus: the upload as JSON, with the file it became (null until then). */
async function uploadAsJson(tus: Tus, ctx: Ctx): Promise<void> {
  // A progress poll, not a client resuming: it must not stop the PATCH it watches.
  const upload = await tus.resumable.status(ctx.state.caller, uploadId(ctx), { takeOver: false });
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
    file: upload.file ? presentFile(upload.file, tus.publicUrl) : null,
  };
}
