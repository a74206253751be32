import { AppError } from '../errors.js';

/**
 * 400 upload_aborted: the request's body ended before it was complete (the
 * client hung up). A class of its own because tus-routes.ts acts on it: it
 * counts it, and terminates an upload whose client never learnt its URL.
 */
export class UploadAborted extends AppError {
  constructor(headers: Record<string, string> = {}) {
    super('upload_aborted', 'The request body ended before it was complete', headers);
  }
}

/**
 * Errors of resumable uploads (tus). Those a client acts on carry their own
 * headers (Upload-Offset, Retry-After); Tus-Resumable is the HTTP layer's:
 * tus-routes.ts sets it on every answer, and http/errors.ts keeps it on errors.
 */
export const resumableErrors = {
  notFound: () => new AppError('upload_not_found', 'Upload not found'),
  offsetMismatch: (offset: number) =>
    new AppError('upload_offset_mismatch', `Upload-Offset does not match the upload's offset of ${offset} bytes`, { 'Upload-Offset': String(offset) }),
  busy: () => new AppError('upload_busy', 'Another request is writing to this upload; try again shortly', { 'Retry-After': '1' }),
  complete: () => new AppError('upload_complete', 'The upload is complete; delete its file with DELETE /api/v1/files/{file_id}'),
  lengthExceeded: (length: number) => new AppError('upload_length_exceeded', `The body goes past Upload-Length (${length} bytes)`),
  lengthMismatch: (why: string) => new AppError('invalid_upload_length', why),
  checksumMismatch: () => new AppError('checksum_mismatch', 'Upload-Checksum does not match the body; nothing of it was kept'),
  /** `offset`: what the request stored before its body ended, when anything of it was kept. */
  aborted: (offset?: number) => new UploadAborted(offset === undefined ? {} : { 'Upload-Offset': String(offset) }),
};
