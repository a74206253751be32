import { AppError } from '../errors.js';

/**
 * 403 file_too_large: past the plan's max_file_size. A class of its own
 * because resumable uploads act on it (resumable.ts removes an upload that
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
  dailyUploadLimit: (limit: number) =>
    new AppError('daily_upload_limit', `The plan's limit of ${limit} uploads per day (UTC) is reached`),
  // The account's own limit (its plan), unlike 503 server_busy, which is the instance's.
  tooManyUploads: (limit: number, retryAfter: number) =>
    new AppError('too_many_uploads', `The plan allows ${limit} uploads at once; wait for one to finish`, { 'Retry-After': String(retryAfter) }),
  // The connection is closed after the answer: the rest of the body is not wanted.
  tooSlow: (minRate: number, windowSeconds: number) =>
    new AppError('upload_too_slow', `The upload sent less than ${minRate} bytes per second over ${windowSeconds} seconds`, { Connection: 'close' }),
  invalidFilename: (why: string) => new AppError('invalid_filename', `Invalid filename: ${why}`),
};
