// Keeps the running server's output one JSON object per line. Node prints
// process warnings (deprecations, a library's "upgrade your Node" notice: the
// AWS SDK printed nine lines on Node 20) and uncaught errors to stderr as
// plain text, which a log collector reading the container's output cannot
// parse. `serve` routes both through the logger instead.
import type { Logger } from 'pino';

export interface ProcessLog {
  /** From now on warnings and uncaught errors go to `logger`; those held so far are logged first. */
  logTo(logger: Logger): void;
}

const describe = (warning: Error & { code?: string }) => ({ name: warning.name, code: warning.code, message: warning.message });

/**
 * Stops Node printing warnings (its own listener is the only one on
 * 'warning' at this point) and holds them until a logger is there.
 */
export function holdProcessWarnings(): ProcessLog {
  const held: Error[] = [];
  const hold = (warning: Error) => void held.push(warning);
  process.removeAllListeners('warning');
  process.on('warning', hold);
  return {
    logTo(logger) {
      process.off('warning', hold);
      for (const warning of held) logger.warn({ warning: describe(warning) }, 'process warning');
      process.on('warning', (warning) => logger.warn({ warning: describe(warning) }, 'process warning'));
      // Node's default would print the stack as text and exit with 1; this logs it as JSON and exits with 1.
      const fatal = (err: unknown, msg: string) => {
        logger.fatal({ err }, msg);
        process.exit(1);
      };
      process.on('uncaughtException', (err) => fatal(err, 'uncaught exception'));
      process.on('unhandledRejection', (reason) => fatal(reason, 'unhandled promise rejection'));
    },
  };
}
