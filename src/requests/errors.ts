import { AppError } from '../errors.js';

/** Asks for the request's password, as a download link does (src/files/errors.ts). */
const ASK_PASSWORD = { 'WWW-Authenticate': 'Basic realm="dropstream"' };

export const requestErrors = {
  // Unknown, closed and another account's requests look alike: a token or id tells nothing of what exists.
  notFound: () => new AppError('request_not_found', 'No such file request, or it was closed'),
  expired: () => new AppError('request_expired', 'This file request has expired'),
  full: (maxFiles: number) => new AppError('request_full', `This file request has received its ${maxFiles} file${maxFiles === 1 ? '' : 's'}`),
  invalid: (why: string) => new AppError('invalid_file_request', `Invalid file request: ${why}`),
  passwordRequired: () =>
    new AppError('password_required', 'This file request has a password: send it with HTTP Basic authentication (any user name)', ASK_PASSWORD),
  wrongPassword: () => new AppError('wrong_password', 'The password for this file request is wrong', ASK_PASSWORD),
};
