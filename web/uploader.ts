// Uploads with Uppy: progress, speed, time left, pause/resume, retries after
// a dropped connection. The web app's uploads (/api/v1/uploads, with the
// key) and a file request's page (its link's /r/{token}/uploads, no key)
// are the same widget. When the service offers uploads straight to the
// store (GET <endpoint>/direct answers 200, docs/direct-uploads.md), the
// bytes go there in parts (direct-upload.ts); otherwise through tus, whose
// tus-js-client keeps each upload's URL in localStorage, keyed by the
// file's fingerprint, so an upload resumes after a reload too.
import Uppy from '@uppy/core';
import type { Body, Meta } from '@uppy/core/utils';
import Dashboard from '@uppy/dashboard';
import Tus from '@uppy/tus';
import { describeFailure } from './api.js';
import { DirectApi } from './direct-api.js';
import DirectUpload from './direct-upload.js';

export interface UploaderOptions {
  /** The tus endpoint: /api/v1/uploads, or a file request's /r/{token}/uploads (the direct routes are under it). */
  endpoint: string;
  /** The plain upload, for a file of no bytes when uploads go straight to the store: /api/v1/files/upload, or /r/{token}/files. */
  plainEndpoint: string;
  /** Sent with every tus request (the API key's Authorization; none through a request link). */
  headers?: Record<string, string>;
  onUploaded(file: { name: string; size: number }): void;
  /** A refusal in the API's words (an ApiError), or tus-js-client's error when no answer came. */
  report(err: unknown): void;
}

/** Asks the service once which way uploads go, then shows the widget in `target`; returns what stops it. */
export function startUploader(target: HTMLElement, options: UploaderOptions): () => void {
  let stopped = false;
  let stop: (() => void) | undefined;
  void new DirectApi(options.endpoint, options.headers).offered().then((direct) => {
    if (stopped) return;
    target.dataset.transport = direct ? 'direct' : 'tus';
    stop = showUploader(target, options, direct);
  });
  return () => {
    stopped = true;
    stop?.();
  };
}

function showUploader(target: HTMLElement, { endpoint, plainEndpoint, headers, onUploaded, report }: UploaderOptions, direct: boolean): () => void {
  const uppy = new Uppy<Meta, Body>({ autoProceed: true, allowMultipleUploadBatches: true })
    .use(Dashboard, {
      target,
      inline: true,
      width: '100%',
      height: 320,
      // Files dropped anywhere on the page go up too.
      dragDropTarget: document.body,
      // No thumbnails: they are blob: images, which the CSP does not allow, and cost CPU for nothing here.
      disableThumbnailGenerator: true,
      proudlyDisplayPoweredByUppy: false,
      showProgressDetails: true,
      hideProgressDetails: false,
    } as never);
  if (direct) {
    uppy.use(DirectUpload, { endpoint, plainEndpoint, headers, limit: 3 });
  } else {
    uppy.use(Tus, {
      endpoint,
      headers,
      // Retry a dropped connection by itself: tus asks the server where it stopped and goes on from there.
      retryDelays: [0, 1000, 3000, 5000, 10000],
      // Uppy's default, said out loud: the page relies on it to resume after a reload.
      storeFingerprintForResuming: true,
      removeFingerprintOnSuccess: true,
      // The server names the file from `filename`; the rest of Uppy's metadata is of no use to it.
      allowedMetaFields: ['name', 'type'],
      limit: 3,
    });
  }
  uppy.on('upload-success', (file) => {
    if (file) onUploaded({ name: file.name ?? '', size: file.size ?? 0 });
  });
  uppy.on('upload-error', (_file, error) => {
    // tus-js-client's message is a long technical sentence; show what the API said.
    // The direct uploader's errors are already the API's (ApiError) or name the store's refusal.
    const response = (error as { originalResponse?: { getStatus(): number; getBody(): string; getHeader(name: string): string | undefined } }).originalResponse;
    if (response) report(describeFailure(response.getStatus(), response.getBody(), response.getHeader('Retry-After') ?? null));
    else report(error);
  });
  return () => uppy.destroy();
}
