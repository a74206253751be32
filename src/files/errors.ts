import { AppError } from '../errors.js';

/**
 * 403 file_too_large: past the plan's max_file_size. A class of its own
 * because resumable uploads act on it (src/tus/uploads.ts removes an upload that
 * passed it; tus-routes.ts then has no upload to point the client to).
 */
export class FileTooLarge extends AppError {
  constructor(readonly limit: number) {
    super('file_too_large', `The file exceeds the plan's maximum file size of ${limit} bytes`);
  }
}

export const fileErrors = {
  notFound: () => new AppError('file_not_found', 'File not found'),
  tooLarge: (limit: number) => new FileTooLarge(limit),
  // The connection is closed after the answer: the rest of the body is not wanted.
  tooSlow: (minRate: number, windowSeconds: number) =>
    new AppError('upload_too_slow', `The upload sent less than ${minRate} bytes per second over ${windowSeconds} seconds`, { Connection: 'close' }),
  invalidFilename: (why: string) => new AppError('invalid_filename', `Invalid filename: ${why}`),
};

/**
 * The upload can never become a file, and nothing of it is kept: the file
 * request it came through was closed or expired, or its own time through
 * the request ran out (REQUEST_UPLOAD_EXPIRY). A class of its own because
 * resumable uploads act on it (src/tus/uploads.ts removes the upload at
 * once, as for FileTooLarge); the statement that saves a file refuses with
 * it too (file-rows.ts), so it lives with the files, not the requests.
 */
export class UploadEnded extends AppError {}

export const uploadEnded = {
  requestClosed: () => new UploadEnded('request_not_found', 'The file request was closed while this upload was in progress; nothing of it was kept'),
  requestExpired: () => new UploadEnded('request_expired', 'The file request expired while this upload was in progress; nothing of it was kept'),
  expired: () => new UploadEnded('upload_expired', 'The upload did not finish within the time an upload through this file request may take; nothing of it was kept'),
};
