import { AppError } from '../errors.js';

export const fileErrors = {
  notFound: () => new AppError(404, 'file_not_found', 'File not found'),
  tooLarge: (limit: number) =>
    new AppError(403, 'file_too_large', `The file exceeds the plan's maximum file size of ${limit} bytes`),
  dailyUploadLimit: (limit: number) =>
    new AppError(403, 'daily_upload_limit', `The plan's limit of ${limit} uploads per day (UTC) is reached`),
  invalidFilename: (why: string) => new AppError(400, 'invalid_filename', `Invalid filename: ${why}`),
};
