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
