import { statusOf, type CodeOf, type ErrorCode } from './error-codes.js';

// One error type for everything a client may be told. `code` is stable and
// registered in error-codes.ts, which gives the status; `message` is safe to
// show. Anything that is not an AppError reaches the client as a plain 500
// with no detail.
export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = statusOf(code);
  }
}

export const badRequest = (code: CodeOf<400>, message: string) => new AppError(code, message);

export const notFound = (message = 'Not found') => new AppError('not_found', message);
