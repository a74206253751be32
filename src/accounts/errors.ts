import { AppError } from '../errors.js';
import type { Scope } from './scopes.js';

export const accountErrors = {
  missingKey: () =>
    new AppError('missing_api_key', 'Authorization header with a Bearer API key is required', {
      'WWW-Authenticate': 'Bearer',
    }),
  invalidKey: () =>
    new AppError('invalid_api_key', 'The API key is invalid', {
      'WWW-Authenticate': 'Bearer error="invalid_token"',
    }),
  planWithoutApi: (plan: string) =>
    new AppError('plan_without_api_access', `The ${plan} plan does not include API access`),
  accountNotFound: () => new AppError('account_not_found', 'No such account'),
  planNotFound: (name: string) => new AppError('plan_not_found', `No plan named ${name}`),
  fileSizeOverStore: (limit: number) =>
    new AppError('invalid_request', `max_file_size: the object store holds at most ${limit} bytes in one file`),
  accountNotEmpty: (files: number, uploads: number) =>
    new AppError('account_not_empty', `The account still has ${files} files and ${uploads} uploads in progress`),
  planInUse: (name: string, accounts: number) => new AppError('plan_in_use', `${accounts} accounts are on the ${name} plan`),
  /** RFC 6750's insufficient_scope, naming the scope in the message and in WWW-Authenticate. */
  insufficientScope: (scope: Scope | '*', why = 'this key does not hold it') =>
    new AppError('insufficient_scope', `This needs the scope ${scope}: ${why}`, {
      'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}"`,
    }),
  addressNotAllowed: () => new AppError('address_not_allowed', 'This key may not be used from this address (its allowed_cidrs)'),
  keyExceedsCreator: (message: string) => new AppError('key_exceeds_creator', message),
  keyLimit: (max: number) => new AppError('key_limit', `The account already has ${max} keys; revoke one first`),
  keyNotFound: () => new AppError('key_not_found', 'No such key in this account'),
  lastFullKey: () =>
    new AppError('last_full_key', 'This is the account\'s last full key without an expiry: make another full key first (the operator\'s `dropstream keys rotate` replaces every key)'),
  invalidKeyRequest: (message: string) => new AppError('invalid_key_request', message),
  emailTaken: () => new AppError('email_taken', 'An account with this email already exists'),
};
