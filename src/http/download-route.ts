import Router from '@koa/router';
import type { Context } from 'koa';
import parseRange from 'range-parser';
import { AppError } from '../errors.js';
import { fileErrors } from '../files/errors.js';
import type { FileRecord } from '../files/record.js';
import type { FileService } from '../files/service.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { ByteRange, ObjectStore } from '../storage/object-store.js';
import type { Metrics } from '../metrics.js';
import { attachment } from './attachment.js';
import { exactBody } from './download-body.js';
import { tooManyFailures } from './rate-limit.js';

export interface DownloadDeps {
  files: FileService;
  store: ObjectStore;
  /** Unknown link tokens per client address. */
  tokenFailures: FailureLimits;
  metrics?: Metrics;
  /** Called when counting a completed download fails; the download itself has succeeded. */
  onCountError: (err: unknown) => void;
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
function requestedRange(ctx: Context, file: FileRecord, etag: string): ByteRange | undefined {
  const header = ctx.get('Range');
  if (!header) return undefined;
  // A client that asks for part of an older version gets the whole new one.
  const ifRange = ctx.get('If-Range');
  if (ifRange && ifRange !== etag) return undefined;
  const ranges = parseRange(file.size, clampSuffixes(header, file.size), { combine: true });
  if (ranges === -1) {
    throw new AppError(416, 'range_not_satisfiable', 'The requested range is outside the file', {
      'Content-Range': `bytes */${file.size}`,
    });
  }
  // Malformed headers and multiple ranges are allowed to be ignored (RFC 9110).
  if (ranges === -2 || ranges.type !== 'bytes' || ranges.length !== 1) return undefined;
  return ranges[0];
}

/**
 * Public download links, outside the versioned API and without a key: the
 * link token is the credential. Files are always attachments, never rendered
 * by the browser, so an uploaded HTML or SVG file cannot run in our origin.
 */
export function downloadRoutes({ files, store, tokenFailures, metrics, onCountError }: DownloadDeps) {
  const router = new Router();

  /**
   * The link's file, once the address is known not to be over its limit of
   * unknown links (429 `too_many_failures` otherwise). The limit check (a
   * Redis round trip) and the lookup (a database one) run side by side
   * rather than one after the other; the answer is what the sequence would
   * give: 429 wins over anything the lookup found or failed with. An
   * unknown or malformed token counts as a failure.
   */
  async function fileOf(ctx: Context, token: string): Promise<FileRecord> {
    const [check, lookup] = await Promise.allSettled([
      tokenFailures.waitSeconds(ctx.ip),
      TOKEN.test(token) ? files.findByLinkToken(token) : Promise.resolve(undefined),
    ]);
    if (check.status === 'rejected') throw check.reason;
    if (check.value > 0) throw tooManyFailures(tokenFailures, check.value, metrics);
    if (lookup.status === 'rejected') throw lookup.reason;
    if (lookup.value) return lookup.value;
    await tokenFailures.fail(ctx.ip).catch(() => 0);
    throw fileErrors.notFound();
  }

  router.get('/download/:token', async (ctx) => {
    const file = await fileOf(ctx, ctx.params.token!);

    const etag = `"${file.sha256}"`;
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
      return;
    }

    const range = requestedRange(ctx, file, etag);
    if (range) {
      ctx.status = 206;
      ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${file.size}`);
    }
    ctx.length = range ? range.end - range.start + 1 : file.size;
    if (ctx.method === 'HEAD') return;

    const length = ctx.length;
    ctx.body = exactBody(await store.get(file.storageKey, range), length);
    const whole = !range || (range.start === 0 && range.end === file.size - 1);
    // 'finish' means every byte, the last included, was accepted by the
    // connection without an error; a client that hangs up first causes
    // 'close' alone, and is not counted. exactBody makes sure 'finish' is not
    // left waiting on the store's stream (see there).
    ctx.res.once('finish', () => {
      metrics?.downloadedBytes.inc(length);
      if (whole) files.countDownload(file.id).catch(onCountError);
    });
  });

  return router;
}
