// One file's upload straight to the store (direct-upload.ts is the Uppy
// plugin that makes these): the service's upload, the parts' signed URLs and
// ETags, and the attempt that sends what the store lacks, stopped by a pause
// or a removal and begun again by a resume or a retry.
import { EventManager, type Uppy } from '@uppy/core';
import { fetcher, type Body, type Meta, type UppyFile } from '@uppy/core/utils';
import { describeFailure } from './api.js';
import { DirectApi, URLS_PER_REQUEST, wireTime, type DirectUpload, type PartUrl, type UploadedFile } from './direct-api.js';
import { fingerprint, savedUploads } from './direct-saved.js';

/** Where the page sends an upload. */
export interface FileUploadOptions {
  /** The uploads' base: /api/v1/uploads, or a file request's /r/{token}/uploads. */
  endpoint: string;
  /** Where a file of no bytes goes (the contract takes sizes from 1): /api/v1/files/upload, or /r/{token}/files. */
  plainEndpoint: string;
  /** The key's Authorization, when there is one (never sent to the store). */
  headers?: Record<string, string>;
}

/** Parts of one file in flight at once. */
const PARTS_IN_FLIGHT = 2;
/** A URL that expires sooner than this is signed again before its part is sent. */
const URL_MARGIN_MS = 60_000;

type File = UppyFile<Meta, Body>;

/** One file's upload: its parts, their ETags, and the run that sends what is missing. */
export class FileUpload {
  #upload?: DirectUpload;
  /** Signed URLs at hand, each with when it expires (ms). */
  readonly #urls = new Map<number, PartUrl & { expires: number }>();
  #signing?: Promise<void>;
  readonly #etags = new Map<number, string>();
  readonly #sent = new Map<number, number>();
  #controller?: AbortController;
  #settle?: { resolve(): void; reject(err: Error): void };
  readonly #events: EventManager<Meta, Body>;
  /** Where the upload's id is kept across a reload (direct-saved.ts). */
  readonly #saved: string;
  finished = false;

  constructor(
    private readonly uppy: Uppy<Meta, Body>,
    private readonly file: File,
    private readonly api: DirectApi,
    private readonly opts: FileUploadOptions,
  ) {
    this.#saved = fingerprint(opts.endpoint, file.data as Blob & { name?: string; lastModified?: number });
    this.#events = new EventManager(uppy);
    this.#events.onFileRemove(file.id, () => this.remove());
    this.#events.onCancelAll(file.id, () => this.remove());
    this.#events.onFilePause(file.id, (paused) => (paused ? this.#stop() : void this.#attempt()));
    this.#events.onPauseAll(file.id, () => this.#stop());
    this.#events.onResumeAll(file.id, () => void this.#attempt());
  }

  /** Settles as #send says; a pause leaves it pending until the resume's attempt settles it. */
  run(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#settle = { resolve, reject };
      void this.#attempt();
    });
  }

  /** The file left Uppy: stop sending and let the service give back what the upload held. */
  remove(): void {
    this.#stop();
    this.#events.remove();
    this.finished = true;
    savedUploads.drop(this.#saved);
    if (this.#upload) void this.api.abort(this.#upload.upload_id).catch(() => {});
    this.#settle?.resolve();
  }

  #stop(): void {
    this.#controller?.abort();
  }

  async #attempt(): Promise<void> {
    this.#stop();
    const controller = new AbortController();
    this.#controller = controller;
    const { signal } = controller;
    const size = this.file.size ?? 0;
    try {
      const response = size === 0 ? await this.#plain(signal) : await this.#multipart(size, signal);
      this.finished = true;
      this.#events.remove();
      savedUploads.drop(this.#saved);
      this.uppy.emit('upload-success', this.uppy.getFile(this.file.id), { status: 201, body: response as unknown as Body, uploadURL: response.public_link });
      this.#settle?.resolve();
    } catch (err) {
      // A pause or a removal stopped this attempt: not a failure.
      if (signal.aborted) return;
      const error = err instanceof Error ? err : new Error(String(err));
      this.uppy.emit('upload-error', this.uppy.getFile(this.file.id), error);
      this.#settle?.reject(error);
    }
  }

  async #multipart(size: number, signal: AbortSignal): Promise<UploadedFile> {
    const saved = this.#upload?.upload_id ?? savedUploads.get(this.#saved);
    if (saved) await this.#resume(saved, size, signal);
    if (!this.#upload) {
      this.#accept(await this.api.create({ name: this.file.name ?? 'file', size }, signal));
      savedUploads.set(this.#saved, this.#upload!.upload_id);
    }
    const upload = this.#upload!;
    this.#progress();
    const missing = Array.from({ length: upload.parts }, (_, i) => i + 1).filter((n) => !this.#etags.has(n));
    const next = () => missing.shift();
    const sender = async () => {
      for (let n = next(); n !== undefined; n = next()) await this.#sendPart(upload, n, signal);
    };
    await Promise.all(Array.from({ length: PARTS_IN_FLIGHT }, sender));
    const parts = [...this.#etags].sort(([a], [b]) => a - b).map(([part_number, etag]) => ({ part_number, etag }));
    try {
      return await this.api.complete(upload.upload_id, parts, signal);
    } catch (err) {
      // A refused complete ended the upload at the service (422 direct_upload_mismatch aborts it): a retry starts anew.
      if (!signal.aborted) this.#forget();
      throw err;
    }
  }

  #accept(upload: DirectUpload): void {
    this.#upload = upload;
    this.#addUrls(upload.part_urls, upload.url_expires_at);
  }

  /**
   * A retry, a resume, or the same file chosen again after a reload: keep
   * the parts the store holds (of their signed sizes). An upload the
   * service no longer has (404: completed, aborted, expired) or that is not
   * this file's is forgotten, and a new one begins.
   */
  async #resume(id: string, size: number, signal: AbortSignal): Promise<void> {
    let status;
    try {
      status = await this.api.status(id, signal);
    } catch (err) {
      // This page's own upload is retried later on a passing failure; one kept from before a reload is only a hint.
      if ((err as { status?: number }).status !== 404 && this.#upload?.upload_id === id) throw err;
      this.#forget();
      return;
    }
    if (status.size !== size) {
      this.#forget();
      return;
    }
    // The URLs at hand stay good for the same upload; the answer carries none.
    if (this.#upload?.upload_id !== id) this.#urls.clear();
    this.#upload = status;
    this.#etags.clear();
    this.#sent.clear();
    for (const part of status.parts_stored) {
      if (part.size === this.#length(status, part.part_number)) this.#etags.set(part.part_number, part.etag);
    }
  }

  #forget(): void {
    this.#upload = undefined;
    this.#urls.clear();
    this.#etags.clear();
    this.#sent.clear();
    savedUploads.drop(this.#saved);
  }

  /** Part n's exact length: every part but the last is part_size, the last the rest (the contract). */
  #length(upload: DirectUpload, n: number): number {
    return n < upload.parts ? upload.part_size : upload.size - (upload.parts - 1) * upload.part_size;
  }

  async #sendPart(upload: DirectUpload, n: number, signal: AbortSignal): Promise<void> {
    const { url, size } = await this.#urlFor(upload, n, signal);
    const start = (n - 1) * upload.part_size;
    // The URL is signed for this length: a part of any other would be refused by the store.
    if (size !== this.#length(upload, n)) throw new Error(`Part ${n} was signed for ${size} bytes, not ${this.#length(upload, n)}`);
    const body = (this.file.data as Blob).slice(start, start + size);
    let xhr: XMLHttpRequest;
    try {
      xhr = await fetcher(url, {
        method: 'PUT',
        body,
        signal,
        // The stall timeout: no progress for 30 s ends the attempt (retried).
        timeout: 30_000,
        retries: 3,
        shouldRetry: (req) => req.status === 0 || req.status === 429 || req.status >= 500,
        onUploadProgress: (event) => {
          this.#sent.set(n, event.loaded);
          this.#progress();
        },
      });
    } catch (err) {
      if (signal.aborted) throw err;
      throw storeFailure(n, (err as { request?: XMLHttpRequest }).request);
    }
    const etag = xhr.getResponseHeader('ETag');
    // A cross-origin answer shows ETag only when the store's CORS rule exposes it (docs/operating.md).
    if (!etag) throw new Error(`The store took part ${n} but did not show its ETag: its CORS rule must expose the ETag header (docs/operating.md)`);
    this.#etags.set(n, etag);
    this.#sent.delete(n);
    this.#progress();
  }

  /** Part n's URL, signing the next batch of missing parts when it is not at hand or expires soon. */
  async #urlFor(upload: DirectUpload, n: number, signal: AbortSignal): Promise<PartUrl> {
    const usable = () => {
      const url = this.#urls.get(n);
      return url && url.expires - Date.now() > URL_MARGIN_MS ? url : undefined;
    };
    // Another part's batch may be on its way, and may hold this one too.
    while (!usable() && this.#signing) await this.#signing;
    const atHand = usable();
    if (atHand) return atHand;
    const wanted = [];
    for (let p = n; p <= upload.parts && wanted.length < URLS_PER_REQUEST; p++) if (!this.#etags.has(p)) wanted.push(p);
    this.#signing = this.api
      .sign(upload.upload_id, wanted, signal)
      .then(({ part_urls, url_expires_at }) => this.#addUrls(part_urls, url_expires_at))
      .finally(() => (this.#signing = undefined));
    await this.#signing;
    const signed = usable();
    if (!signed) throw new Error(`The service signed no usable URL for part ${n}`);
    return signed;
  }

  #addUrls(urls: PartUrl[] | undefined, expiresAt: string | undefined): void {
    if (!urls || !expiresAt) return;
    const expires = wireTime(expiresAt);
    for (const url of urls) this.#urls.set(url.part_number, { ...url, expires });
  }

  #progress(): void {
    const upload = this.#upload;
    if (!upload) return;
    let bytes = 0;
    for (const n of this.#etags.keys()) bytes += this.#length(upload, n);
    for (const loaded of this.#sent.values()) bytes += loaded;
    const file = this.uppy.getFile(this.file.id);
    if (!file) return;
    this.uppy.emit('upload-progress', file, { uploadStarted: file.progress.uploadStarted ?? Date.now(), bytesUploaded: bytes, bytesTotal: upload.size });
  }

  /** A file of no bytes: one plain upload to the service. */
  async #plain(signal: AbortSignal): Promise<UploadedFile> {
    const form = new FormData();
    form.append('file', this.file.data as Blob, this.file.name ?? 'file');
    const res = await fetch(this.opts.plainEndpoint, { method: 'POST', headers: this.opts.headers, body: form, signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]) });
    const text = await res.text();
    if (!res.ok) throw describeFailure(res.status, text, res.headers.get('Retry-After'));
    return JSON.parse(text) as UploadedFile;
  }
}

/** A part the store refused or never answered, in words a person can act on. */
function storeFailure(n: number, xhr: XMLHttpRequest | undefined): Error {
  if (!xhr || xhr.status === 0) return new Error(`Part ${n} did not reach the store (a network error, or its CORS rule does not allow this page's origin)`);
  const code = /<Code>([^<]*)<\/Code>/.exec(xhr.responseText ?? '')?.[1];
  return new Error(`The store refused part ${n}: ${xhr.status}${code ? ` ${code}` : ''}`);
}
