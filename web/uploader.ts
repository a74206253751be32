// Uploads through tus with Uppy: progress, speed, time left, pause/resume,
// retries after a dropped connection, and resumption after a reload
// (tus-js-client keeps each upload's URL in localStorage, keyed by the
// file's fingerprint, until it completes). The web app's uploads
// (/api/v1/uploads, with the key) and a file request's page (its link's
// /r/{token}/uploads, no key) are the same widget.
import Uppy from '@uppy/core';
import Dashboard from '@uppy/dashboard';
import Tus from '@uppy/tus';
import { describeFailure } from './api.js';

export interface UploaderOptions {
  /** The tus endpoint: /api/v1/uploads, or a file request's /r/{token}/uploads. */
  endpoint: string;
  /** Sent with every tus request (the API key's Authorization; none through a request link). */
  headers?: Record<string, string>;
  onUploaded(file: { name: string; size: number }): void;
  /** A refusal in the API's words (an ApiError), or tus-js-client's error when no answer came. */
  report(err: unknown): void;
}

export function startUploader(target: HTMLElement, { endpoint, headers, onUploaded, report }: UploaderOptions): () => void {
  const uppy = new Uppy({ autoProceed: true, allowMultipleUploadBatches: true })
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
    } as never)
    .use(Tus, {
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
  uppy.on('upload-success', (file) => {
    if (file) onUploaded({ name: file.name ?? '', size: file.size ?? 0 });
  });
  uppy.on('upload-error', (_file, error) => {
    // tus-js-client's message is a long technical sentence; show what the API said.
    const response = (error as { originalResponse?: { getStatus(): number; getBody(): string; getHeader(name: string): string | undefined } }).originalResponse;
    if (response) report(describeFailure(response.getStatus(), response.getBody(), response.getHeader('Retry-After') ?? null));
    else report(error);
  });
  return () => uppy.destroy();
}
