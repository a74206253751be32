// The direct upload's refusals (codes in src/error-codes.ts).
import { AppError } from '../errors.js';

export const directErrors = {
  off: () => new AppError('direct_uploads_off', 'This server does not take uploads straight to the store (S3_DIRECT_UPLOADS); use tus (/uploads) or POST /files/upload'),
  invalid: (why: string) => new AppError('invalid_direct_upload', why),
  notFound: () => new AppError('upload_not_found', 'No such direct upload in this account, or it was completed, aborted or expired'),
  busy: () => new AppError('upload_busy', 'Another request is completing or aborting this upload; try again in a moment', { 'Retry-After': '1' }),
  mismatch: (why: string) => new AppError('direct_upload_mismatch', `${why}; the upload was aborted and nothing of it kept`),
  tooMany: (limit: number) =>
    new AppError('too_many_uploads', `The plan allows ${limit} uploads at once, and this many direct uploads are open; complete or abort one first`, { 'Retry-After': '5' }),
};
