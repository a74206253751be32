import { AppError } from '../errors.js';

/** Asks the client for the link's password; browsers show their own prompt for it. */
const ASK_PASSWORD = { 'WWW-Authenticate': 'Basic realm="dropstream"' };

export const linkErrors = {
  notFound: () => new AppError('link_not_found', 'No such link on this file'),
  expired: () => new AppError('link_expired', 'This link has expired'),
  exhausted: (maxDownloads: number) =>
    new AppError('link_exhausted', `This link's ${maxDownloads} download${maxDownloads === 1 ? ' is' : 's are'} used up`),
  passwordRequired: () =>
    new AppError('password_required', 'This link has a password: send it with HTTP Basic authentication (any user name)', ASK_PASSWORD),
  // Counted before it was checked (downloads/password-guard.ts), so nothing is counted here.
  wrongPassword: () => new AppError('wrong_password', 'The password for this link is wrong', ASK_PASSWORD),
  // Another site's page (an image, a frame, a fetch) asked for a password link: the browser may have added the password it cached (issue 50).
  embedded: () =>
    new AppError('cross_site_request', 'This link has a password and is not served to another site\'s page; open the link itself'),
  // More guesses than the scrypt queue holds (link-password.ts): nothing was checked, so nothing counts.
  checksBusy: () =>
    new AppError('password_checks_busy', 'Too many link passwords are being checked right now; try again shortly', { 'Retry-After': '1' }),
  // The link took its limit of wrong passwords (from all addresses): every password is refused until the lock ends.
  passwordLocked: (seconds: number) =>
    new AppError('link_password_locked', 'This link had too many wrong passwords; its password is not checked until the lock ends', { 'Retry-After': String(seconds) }),
};
