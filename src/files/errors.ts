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

/** Asks the client for the link's password; browsers show their own prompt for it. */
const ASK_PASSWORD = { 'WWW-Authenticate': 'Basic realm="dropstream"' };

export const linkErrors = {
  notFound: () => new AppError('link_not_found', 'No such link on this file'),
  expired: () => new AppError('link_expired', 'This link has expired'),
  exhausted: (maxDownloads: number) =>
    new AppError('link_exhausted', `This link's ${maxDownloads} download${maxDownloads === 1 ? ' is' : 's are'} used up`),
  passwordRequired: () =>
    new AppError('password_required', 'This link has a password: send it with HTTP Basic authentication (any user name)', ASK_PASSWORD),
  // Counted before it was checked (http/password-guard.ts), so nothing is counted here.
  wrongPassword: () => new AppError('wrong_password', 'The password for this link is wrong', ASK_PASSWORD),
  // More guesses than the scrypt queue holds (link-password.ts): nothing was checked, so nothing counts.
  checksBusy: () =>
    new AppError('password_checks_busy', 'Too many link passwords are being checked right now; try again shortly', { 'Retry-After': '1' }),
  // The link took its limit of wrong passwords (from all addresses): every password is refused until the lock ends.
  passwordLocked: (seconds: number) =>
    new AppError('link_password_locked', 'This link had too many wrong passwords; its password is not checked until the lock ends', { 'Retry-After': String(seconds) }),
};
