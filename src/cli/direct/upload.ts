// `dropstream upload` straight to the store (docs/direct-uploads.md), when
// the server offers it: the service creates the upload and signs part URLs,
// the parts go to the store a few at once (parts.ts), and the service
// completes the file. The upload is remembered as soon as it exists
// (upload-store.ts, as tus uploads are), so one cut short by Ctrl-C, a
// network that stayed away or a killed process continues when the same
// command runs again: the service lists the parts the store holds
// (parts_stored) and only the others are sent.
import { basename } from 'node:path';
import type { PreviousUpload } from 'tus-js-client';
import { CliError } from '../cli-error.js';
import { createProgress, formatBytes } from '../progress.js';
import { retryLine } from '../resumable-upload.js';
import { Interrupted, onSigint } from '../transfer-http.js';
import { uploadFingerprint, uploadStore } from '../upload-store.js';
import { directApi, DirectApiError, wireTime, type Completed, type DirectApi, type DirectOffer, type DirectUploadState, type PartUrl } from './api.js';
import { sendParts, type Part } from './parts.js';

export interface DirectUploadOptions {
  /** `<server>/api/v1/uploads/direct`, or `<upload link>/uploads/direct`. */
  base: URL;
  /** `Bearer <key>`, a file request's `Basic ...`, or none. */
  authorization?: string;
  offer: DirectOffer;
  path: string;
  size: number;
  showProgress: boolean;
  /** The link's rules (expires_in, max_downloads, password), as the API takes them. */
  rules: Record<string, string | number>;
  /** --part-size; the service picks one when absent. */
  partSize?: number;
  /** Start over: abort (and forget) an upload of this file a previous run left. */
  fresh: boolean;
  env: NodeJS.ProcessEnv;
}

/** The parts of an upload, as the service cut it: every one `part_size` bytes but the last. */
export function partsOf(upload: Pick<DirectUploadState, 'size' | 'part_size' | 'parts'>): Part[] {
  return Array.from({ length: upload.parts }, (_, i) => ({
    partNumber: i + 1,
    offset: i * upload.part_size,
    size: i + 1 < upload.parts ? upload.part_size : upload.size - i * upload.part_size,
  }));
}

/** What is left to say about an interrupted upload: what the store holds (parts in flight were lost), and how to continue. */
const interruptedLine = (stored: number, size: number, partsStored: number, parts: number) =>
  `interrupted at ${Math.floor((stored / size) * 100)}% (${formatBytes(stored)} of ${formatBytes(size)} in the store, ${partsStored} of ${parts} parts); ` +
  'run the same command again to resume, or add --fresh to start over';

/** Part numbers per signing request: the route's most. */
const SIGN_BATCH = 100;

/**
 * URLs for an upload's parts: those creation gave, then more signed in
 * batches of up to 100 (parts past the first 100, or URLs close to their
 * expiry), one batch at a time however many parts ask.
 */
export function partUrls(api: Pick<DirectApi, 'sign'>, id: string, offer: DirectOffer, toSend: readonly Part[], stored: ReadonlySet<number>) {
  const cache = new Map<number, { url: string; renewAt: number }>();
  let signing: Promise<void> | undefined;

  /**
   * Renewed well before the expiry the service names: a PUT that starts in
   * time is taken whatever its length. The lifetime is `url_seconds` unless
   * the named expiry comes sooner by our clock (never later: a clock that is
   * behind would keep a dead URL).
   */
  function add(urls: readonly PartUrl[], expiresAt: string | undefined): void {
    const byClock = wireTime(expiresAt) - Date.now();
    const lifetime = Math.min(offer.url_seconds * 1000, byClock > 0 ? byClock : Infinity);
    const renewAt = Date.now() + lifetime - Math.min(60_000, lifetime / 4);
    for (const part of urls) cache.set(part.part_number, { url: part.url, renewAt });
  }

  const usable = (n: number) => {
    const entry = cache.get(n);
    return entry && entry.renewAt > Date.now() ? entry.url : undefined;
  };

  async function signFrom(n: number): Promise<void> {
    const numbers = [n, ...toSend.map((p) => p.partNumber).filter((m) => m > n && !stored.has(m) && !usable(m))].slice(0, SIGN_BATCH);
    const signed = await api.sign(id, numbers);
    add(signed.part_urls, signed.url_expires_at);
  }

  return {
    add,
    async urlFor(n: number, fresh: boolean): Promise<string> {
      if (fresh) cache.delete(n);
      for (let own = false; ; ) {
        const url = usable(n);
        if (url) return url;
        // Just signed: used even when it is already due for renewal (an upload near its expiry).
        if (own) {
          const signed = cache.get(n)?.url;
          if (signed) return signed;
          throw new CliError(`the server signed no URL for part ${n}`);
        }
        // Another part's batch may hold this one: wait for it first.
        if (signing) await signing.catch(() => {});
        else {
          own = true;
          signing = signFrom(n).finally(() => (signing = undefined));
          await signing;
        }
      }
    },
  };
}

/** The upload a previous run left for this file, as the service has it now; undefined when none (or it is gone). */
async function previousUpload(api: DirectApi, store: ReturnType<typeof uploadStore>, fingerprint: string, size: number): Promise<{ state: DirectUploadState; key: string } | undefined> {
  const previous = (await store.findUploadsByFingerprint(fingerprint)).sort((a, b) => Date.parse(b.creationTime) - Date.parse(a.creationTime));
  for (const entry of previous) {
    const id = entry.uploadUrl ? decodeURIComponent(new URL(entry.uploadUrl).pathname.split('/').at(-1) ?? '') : '';
    const state = id
      ? await api.status(id).catch((err: unknown) => {
          // Completed, aborted or expired: nothing to continue.
          if (err instanceof DirectApiError && err.status === 404) return undefined;
          throw err;
        })
      : undefined;
    if (state && state.size === size) return { state, key: entry.urlStorageKey };
    await store.removeUpload(entry.urlStorageKey);
  }
  return undefined;
}

/** Uploads the file; resolves with what `complete` answered (the link, or a file request's receipt). */
export async function directUpload(options: DirectUploadOptions): Promise<Completed> {
  const { path, size, offer } = options;
  const progress = createProgress({ enabled: options.showProgress, total: size });
  const interrupt = new AbortController();
  const restoreSigint = onSigint(() => interrupt.abort());
  const onRetry = (delayMs: number, reason: string) => progress.note(`dropstream: ${retryLine(delayMs, reason)}`);
  const api = directApi({ base: options.base, authorization: options.authorization, signal: interrupt.signal, onRetry });
  // Creation and completion run to their answer even after Ctrl-C: cut, either
  // could leave the service with an upload (or a file) this run never learns of.
  const steady = directApi({ base: options.base, authorization: options.authorization, signal: new AbortController().signal, onRetry });
  const store = uploadStore(options.env, (line) => progress.note(line), 'direct');
  const fingerprint = await uploadFingerprint(options.base, path, Object.fromEntries(Object.entries(options.rules).map(([k, v]) => [k, String(v)])));
  let storedBytes = 0;
  let inFlight = 0;
  let parts: Part[] = [];
  const etags = new Map<number, string>();
  try {
    if (options.fresh) {
      for (const old of await store.findUploadsByFingerprint(fingerprint)) {
        const id = old.uploadUrl ? decodeURIComponent(new URL(old.uploadUrl).pathname.split('/').at(-1) ?? '') : '';
        // Gives back its slot and reservation; one already gone is no matter.
        if (id) await steady.abort(id).catch(() => {});
        await store.removeUpload(old.urlStorageKey);
      }
    }
    let upload = options.fresh ? undefined : await previousUpload(api, store, fingerprint, size);
    if (upload) {
      parts = partsOf(upload.state);
      for (const stored of upload.state.parts_stored ?? []) {
        const part = parts[stored.part_number - 1];
        // A part of another length is sent again (complete would refuse it).
        if (part && stored.size === part.size && stored.etag) etags.set(part.partNumber, stored.etag);
      }
      storedBytes = parts.filter((p) => etags.has(p.partNumber)).reduce((sum, p) => sum + p.size, 0);
      progress.note(`dropstream: resumed at ${Math.floor((storedBytes / size) * 100)}% (${formatBytes(storedBytes)} of ${formatBytes(size)} already in the store)`);
      progress.resumed(storedBytes);
    } else {
      const state = await steady.create({ filename: basename(path), size, ...(options.partSize ? { part_size: options.partSize } : {}), ...options.rules });
      const entry: PreviousUpload = { size, metadata: {}, creationTime: new Date().toISOString(), uploadUrl: api.urlOf(state.upload_id).href, urlStorageKey: '', parallelUploadUrls: null };
      upload = { state, key: await store.addUpload(fingerprint, entry) };
      parts = partsOf(state);
    }
    if (interrupt.signal.aborted) throw interrupt.signal.reason;
    const { state, key } = upload;
    const toSend = parts.filter((p) => !etags.has(p.partNumber));
    const stored = new Set(etags.keys());
    const urls = partUrls(api, state.upload_id, offer, toSend, stored);
    if (state.part_urls) urls.add(state.part_urls, state.url_expires_at);
    await sendParts({
      path,
      parts: toSend,
      urls,
      signal: interrupt.signal,
      onBytes: (delta) => {
        inFlight += delta;
        progress.update(storedBytes + inFlight);
      },
      onStored: (n, etag) => {
        const length = parts[n - 1]!.size;
        inFlight -= length;
        storedBytes += length;
        etags.set(n, etag);
        stored.add(n);
        progress.update(storedBytes + inFlight);
      },
      onRetry,
    });
    const completed = await steady
      .complete(
        state.upload_id,
        [...etags].sort(([a], [b]) => a - b).map(([part_number, etag]) => ({ part_number, etag })),
      )
      .catch(async (err: unknown) => {
        // Refused for good (the service aborted it, or it is gone): nothing to resume.
        if (err instanceof DirectApiError && (err.status === 422 || err.status === 404)) await store.removeUpload(key);
        throw err;
      });
    await store.removeUpload(key);
    return completed;
  } catch (err) {
    if (interrupt.signal.aborted) {
      progress.finish();
      throw new Interrupted(interruptedLine(storedBytes, size, etags.size, parts.length));
    }
    if (err instanceof DirectApiError || !(err instanceof CliError) || !parts.length) throw err;
    // A part or a signing that failed for good: what the store holds stays for the next run.
    throw new CliError(`${err.message}; ${etags.size} of ${parts.length} parts are in the store: run the same command again to resume, or add --fresh to start over`);
  } finally {
    restoreSigint();
    progress.finish();
  }
}
