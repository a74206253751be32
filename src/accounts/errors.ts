import { AppError } from '../errors.js';

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
  emailTaken: () => new AppError('email_taken', 'An account with this email already exists'),
};
