// An Uppy uploader that sends a file's bytes straight to the S3 store in
// parts, through the URLs the service signs (docs/direct-uploads.md), with
// the service's JSON requests around them: create, more URLs, the parts the
// store holds (on a retry), complete, abort.
//
// Why not @uppy/aws-s3: its version for @uppy/core 6 (6.x, rewritten) no
// longer has the createMultipartUpload / signPart / listParts / complete /
// abort hooks; its `signRequest` mode signs S3's own requests, so the
// browser would start and complete the multipart upload at the store
// itself, and the service would check nothing before signing or before the
// file exists. Its part loop is also its own: parts of max(5 MiB,
// getChunkSize(file)), grown to size / 10,000 for a large file, which must
// equal the signed sizes or the store refuses them. Here the parts are cut
// from the service's answer itself (each URL carries its exact size), so
// they match by construction (direct-file.ts, one file's upload). The
// transfer is Uppy's own XHR helper (`fetcher`: upload progress, a stall
// timeout, retries of 5xx, 429 and dropped connections).
import { BasePlugin, type PluginOpts, type Uppy } from '@uppy/core';
import { filterFilesToEmitUploadStarted, filterFilesToUpload, type Body, type Meta, type UppyFile } from '@uppy/core/utils';
import { DirectApi } from './direct-api.js';
import { FileUpload, type FileUploadOptions } from './direct-file.js';

export interface DirectUploadOptions extends PluginOpts, FileUploadOptions {
  /** Files at once. */
  limit?: number;
}

type File = UppyFile<Meta, Body>;

export default class DirectUploadPlugin extends BasePlugin<DirectUploadOptions, Meta, Body> {
  readonly #api: DirectApi;
  /** Uploads that began, by Uppy's file id: a retry goes on with the same one. */
  readonly #uploads = new Map<string, FileUpload>();

  constructor(uppy: Uppy<Meta, Body>, opts: DirectUploadOptions) {
    super(uppy, opts);
    this.id = opts.id ?? 'DirectUpload';
    this.type = 'uploader';
    this.#api = new DirectApi(opts.endpoint, opts.headers);
  }

  override install(): void {
    // Pause and resume: the dashboard shows them, and a resume sends only the parts the store lacks.
    this.uppy.setState({ capabilities: { ...this.uppy.getState().capabilities, resumableUploads: true } });
    this.uppy.addUploader(this.#upload);
    this.uppy.on('file-removed', this.#removed);
  }

  override uninstall(): void {
    this.uppy.removeUploader(this.#upload);
    this.uppy.off('file-removed', this.#removed);
    for (const upload of this.#uploads.values()) upload.remove();
    this.#uploads.clear();
  }

  /** A file removed after its upload failed has no run left to end: drop its FileUpload here (its own listener sends the DELETE). */
  #removed = (file: File | undefined): void => {
    if (file) this.#uploads.delete(file.id);
  };

  #upload = async (fileIDs: string[]): Promise<void> => {
    // As Uppy's own uploaders: not the files done or failed (a retry clears the error first).
    const files = filterFilesToUpload(this.uppy.getFilesByIds(fileIDs));
    this.uppy.emit('upload-start', filterFilesToEmitUploadStarted(files));
    const queue = [...files];
    const worker = async () => {
      for (let file = queue.shift(); file; file = queue.shift()) {
        if (!this.uppy.getFile(file.id)) continue;
        await this.#send(file).catch(() => {});
      }
    };
    await Promise.all(Array.from({ length: this.opts.limit ?? 3 }, worker));
  };

  /** Resolves when the file is uploaded or removed; rejects (after upload-error) when it failed. */
  #send(file: File): Promise<void> {
    let upload = this.#uploads.get(file.id);
    if (!upload) {
      upload = new FileUpload(this.uppy, file, this.#api, this.opts);
      this.#uploads.set(file.id, upload);
    }
    return upload.run().finally(() => {
      if (upload.finished) this.#uploads.delete(file.id);
    });
  }
}
