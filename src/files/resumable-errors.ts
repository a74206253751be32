import { AppError } from '../errors.js';

/** Errors of resumable uploads (tus); the HTTP layer adds the tus headers. */
export const resumableErrors = {
  notFound: () => new AppError(404, 'upload_not_found', 'Upload not found'),
  offsetMismatch: (offset: number) =>
    new AppError(409, 'upload_offset_mismatch', `Upload-Offset does not match the upload's offset of ${offset} bytes`, { 'Upload-Offset': String(offset) }),
  busy: () => new AppError(409, 'upload_busy', 'Another request is writing to this upload; try again shortly', { 'Retry-After': '1' }),
  complete: () => new AppError(409, 'upload_complete', 'The upload is complete; delete its file with DELETE /api/v1/files/{file_id}'),
  lengthExceeded: (length: number) => new AppError(400, 'upload_length_exceeded', `The body goes past Upload-Length (${length} bytes)`),
  lengthMismatch: (why: string) => new AppError(400, 'invalid_upload_length', why),
  checksumMismatch: () => new AppError(460, 'checksum_mismatch', 'Upload-Checksum does not match the body; nothing of it was kept'),
  aborted: () => new AppError(400, 'upload_aborted', 'The request body ended before it was complete'),
};
