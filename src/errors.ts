// One error type for everything a client may be told. `code` is stable and
// documented in the README; `message` is safe to show. Anything that is not an
// AppError reaches the client as a plain 500 with no detail.
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (code: string, message: string) => new AppError(400, code, message);

export const notFound = (message = 'Not found') => new AppError(404, 'not_found', message);
