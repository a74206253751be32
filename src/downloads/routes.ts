import Router from '@koa/router';
import type { Readable } from 'node:stream';
import type { Context } from 'koa';
import parseRange from 'range-parser';
import { AppError } from '../errors.js';
import { fileErrors } from '../files/errors.js';
import type { DownloadGrant, Downloads } from '../links/download.js';
import type { LinkedFile } from '../links/links.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { ByteRange } from '../storage/object-store.js';
import { PooledRead } from '../storage/pooled-read.js';
import type { Metrics } from '../metrics.js';
import { attachment } from './attachment.js';
import { watchResponseRate, type BodyRateOptions } from '../http/body-rate.js';
import { exactBody, pooledBody } from './body.js';
import { beforeClose, bytesAcked, canReadAcked } from './acked-bytes.js';
import { embeddedByAnotherSite } from '../http/cross-site.js';
import { passwordGuard } from './password-guard.js';
import { tooManyFailures } from '../http/rate-limit.js';
import { recordFailure } from '../http/request-log.js';
import { basicPassword } from '../http/auth.js';

export interface DownloadDeps {
  downloads: Downloads;
  /** Unknown link tokens and wrong link passwords per client address. */
  tokenFailures: FailureLimits;
  /** Wrong passwords per link, from all addresses. */
  passwordFailures: FailureLimits;
  metrics?: Metrics;
  /** The rate a client must read at; a slower one is cut (it holds a store stream, and on a limited link part of the budget). */
  rate?: BodyRateOptions;
  /** Called when counting a completed download (or giving back a cut one's bytes) fails; the response itself is done. */
  onCountError: (err: unknown) => void;
  /** CORS_ORIGINS listed by name: their pages may fetch a password link with its password (cross-site.ts). */
  corsOrigins?: readonly string[];
  /** AUDIT_DOWNLOADS: the address the audit keeps of a downloading client (absent: downloads are not recorded). */
  auditAddress?: (ip: string) => string | null;
}

const TOKEN = /^[A-Za-z0-9_-]{16,64}$/;

/**
 * RFC 9110 section 14.1.2: a suffix range longer than the representation
 * selects all of it (`bytes=-500` of a 1-byte file is `bytes 0-0/1`).
 * range-parser (1.3.0, the latest release) refuses such a suffix as
 * unsatisfiable, so it is rewritten as `0-` first. A suffix of an empty file
 * stays unsatisfiable, as does `-0`.
 */
function clampSuffixes(header: string, size: number): string {
  return header.replace(/([=,]\s*)-(\d+)/g, (spec, before: string, length: string) => (size > 0 && Number(length) > size ? `${before}0-` : spec));
}

/** The single range to serve, `undefined` for the whole file; throws 416 for a range that cannot be served. */
function requestedRange(ctx: Context, file: LinkedFile, etag: string): ByteRange | undefined {
  const header = ctx.get('Range');
  if (!header) return undefined;
  // A client that asks for part of an older version gets the whole new one.
  const ifRange = ctx.get('If-Range');
  if (ifRange && ifRange !== etag) return undefined;
  const ranges = parseRange(file.size, clampSuffixes(header, file.size), { combine: true });
  if (ranges === -1) {
    throw new AppError('range_not_satisfiable', 'The requested range is outside the file', {
      'Content-Range': `bytes */${file.size}`,
    });
  }
  // Malformed headers and multiple ranges are allowed to be ignored (RFC 9110).
  if (ranges === -2 || ranges.type !== 'bytes' || ranges.length !== 1) return undefined;
  return ranges[0];
}

/**
 * Public download links, outside the versioned API and without a key: the
 * link token is the credential (and a link's password, when it has one).
 * Files are always attachments, never rendered by the browser, so an
 * uploaded HTML or SVG file cannot run in our origin. The link's rules and
 * counts are the links component's (src/links/download.ts: authorise, then
 * open or hand out); this route reads the request's headers and writes the
 * response.
 */
export function downloadRoutes({ downloads, tokenFailures, passwordFailures, metrics, rate, onCountError, corsOrigins, auditAddress }: DownloadDeps) {
  const auditOf = (ctx: Context) => (auditAddress ? { address: auditAddress(ctx.ip) } : undefined);
  const router = new Router();

  /**
   * An unknown or malformed token counts against the client's address (one
   * Redis trip, none once this instance knows the address is refused):
   * `refusal` as it is, or 429 `too_many_failures` over the limit. A valid
   * link without a password is served whatever its address guessed before
   * (issue 27: one guesser behind a NAT must not lock out the others there;
   * tokens are 128-bit random) and costs no Redis trip. A wrong password
   * was counted before it was checked (password-guard.ts).
   */
  async function failed(ctx: Context, refusal: AppError): Promise<never> {
    const wait = tokenFailures.knownWaitSeconds(ctx.ip) || (await tokenFailures.fail(ctx.ip).catch(() => 0));
    if (wait > 0) throw tooManyFailures(tokenFailures, wait, metrics);
    throw refusal;
  }

  /** Headers of the file, and what of it to send: undefined for no body (HEAD, or a fresh cache), else the range (none: the whole file). */
  function describe(ctx: Context, file: LinkedFile): { range?: ByteRange } | undefined {
    // A file whose bytes the service never saw has no SHA-256: its object's key
    // is as strong a validator (an object is never rewritten under its key).
    const etag = `"${file.sha256 ?? file.storageKey}"`;
    ctx.set({
      'Content-Disposition': attachment(file.filename),
      'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': "default-src 'none'; sandbox",
      'Accept-Ranges': 'bytes',
      'Cache-Control': 'private, no-cache',
      ETag: etag,
    });
    ctx.type = 'application/octet-stream';
    ctx.status = 200;
    if (ctx.fresh) {
      ctx.status = 304;
      return undefined;
    }
    const range = requestedRange(ctx, file, etag);
    if (range) {
      ctx.status = 206;
      ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${file.size}`);
    }
    ctx.length = range ? range.end - range.start + 1 : file.size;
    return ctx.method === 'HEAD' ? undefined : { range };
  }

  /**
   * The store serves the bytes (S3_PRESIGNED_DOWNLOADS): 302 to a presigned
   * URL that makes the store answer with our Content-Disposition and type.
   * no-store: a cached redirect would outlive its URL, and the count.
   */
  async function redirect(ctx: Context, grant: DownloadGrant, range: ByteRange | undefined): Promise<void> {
    const url = await downloads.handOut(grant, range, { disposition: attachment(grant.file.filename), audit: auditOf(ctx) });
    ctx.remove('Content-Range');
    ctx.remove('Accept-Ranges');
    ctx.remove('ETag');
    ctx.remove('Content-Disposition');
    ctx.set({ 'Cache-Control': 'no-store', Location: url });
    ctx.status = 302;
    ctx.type = 'text/plain';
    ctx.body = 'Found: the file is served by its store\n';
  }

  router.get('/download/:token', async (ctx) => {
    const token = ctx.params.token!;
    const credentials = {
      password: basicPassword(ctx.get('Authorization') || undefined),
      guard: passwordGuard({ address: tokenFailures, link: passwordFailures, metrics }, ctx.ip),
      embedded: embeddedByAnotherSite(ctx, corsOrigins),
    };
    let grant: DownloadGrant | undefined;
    try {
      grant = TOKEN.test(token) ? await downloads.authorise(token, credentials) : undefined;
    } catch (err) {
      if (err instanceof AppError && err.code === 'password_checks_busy') metrics?.rateLimitRefusals.inc({ reason: err.code });
      throw err;
    }
    if (!grant) return failed(ctx, fileErrors.notFound());
    const wanted = describe(ctx, grant.file);
    if (!wanted) return;
    if (downloads.offloads(grant, wanted.range)) return redirect(ctx, grant, wanted.range);
    const download = await downloads.open(grant, wanted.range, auditOf(ctx));
    if (!download) return failed(ctx, fileErrors.notFound());
    const { body, length, settle } = download;

    // A limited link is charged what its client acknowledged, not what was
    // handed to the kernel (acked-bytes.ts): the peer's acknowledged count
    // less what the connection carried before this body (earlier responses,
    // this one's head), read just before the socket closes.
    const socket = ctx.res.socket;
    const before = socket?.bytesWritten ?? 0;
    const head = () => {
      const header = (ctx.res as unknown as { _header?: unknown })._header;
      return typeof header === 'string' ? Buffer.byteLength(header) : 0;
    };
    const acked = download.limited && canReadAcked() ? () => {
      const count = bytesAcked(socket);
      return count === undefined ? undefined : count - before - head();
    } : undefined;
    const pooled = body instanceof PooledRead ? pooledBody(body, acked) : undefined;
    const exact = pooled ?? exactBody(body as Readable, length, acked);
    const unhook = download.limited && socket && canReadAcked() ? beforeClose(socket, () => exact.measure()) : () => {};
    // Bytes in reused buffers are written by pooledBody itself, each write's
    // callback giving its buffer back: Koa does not pipe them.
    if (pooled) ctx.respond = false;
    else ctx.body = exact;
    // A client that left while the download was being opened has had its
    // 'close' already: give back all that was reserved for it now.
    if (ctx.res.destroyed) {
      unhook();
      if (body instanceof PooledRead) body.destroy();
      return void settle(0).catch(onCountError);
    }
    // 'finish' means every byte, the last included, was accepted by the
    // connection without an error; a client that hangs up first causes
    // 'close' alone, and is not counted (a limited link gets back what its
    // client did not acknowledge). exactBody makes sure 'finish' is not left waiting
    // on the store's stream (see there).
    let finished = false;
    ctx.res.once('finish', () => {
      finished = true;
      unhook();
      metrics?.downloadedBytes.inc(length);
      settle(length).catch(onCountError);
    });
    ctx.res.once('close', () => {
      unhook();
      if (!finished) settle(exact.acknowledged).catch(onCountError);
    });
    // Measured before a cut below, as the socket still has its descriptor.
    const cut = () => {
      exact.measure();
      ctx.res.socket?.resetAndDestroy();
      ctx.res.destroy();
    };
    // The link was revoked or its file deleted (on any instance): the rest
    // is not sent. A reset, as for a slow client, so the kernel's buffered
    // bytes do not reach the client either.
    download.revoked?.addEventListener('abort', cut, { once: true });
    if (pooled) {
      const read = body as PooledRead;
      ctx.res.once('close', () => read.destroy());
      // A store failure after the head: Koa's error channel (lateErrors logs
      // and counts it, as for a piped body's), and the response is cut.
      pooled.send(ctx.res, length, (err) => {
        ctx.app.emit('error', err, ctx);
        ctx.res.destroy();
      });
    }
    // A client reading slower than DOWNLOAD_MIN_RATE is cut (logged 408: the
    // server ended it); its 'close' gives back what it did not receive. A
    // reset, not a close: a close would still hand the kernel's buffered
    // megabytes to the client at its own pace before it learns of the end.
    // The watch ends itself at its next tick once the response is over (a
    // 'close' listener of its own would be the response's eleventh, and
    // Node warns of a leak past ten).
    if (rate) {
      watchResponseRate(ctx.res, rate, () => {
        recordFailure(ctx, 408);
        cut();
      });
    }
  });

  return router;
}
