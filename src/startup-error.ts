/**
 * The configuration is well-formed but a dependency refuses it at start (the
 * object store rejects the credentials, ...). The message names the cause in
 * one line an operator can act on; the CLI prints it without a stack, as it
 * does a ConfigError.
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}
