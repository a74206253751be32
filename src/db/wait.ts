// At start, PostgreSQL may not be up yet (compose starts services together, a
// Kubernetes pod can start before its database). Instead of exiting at the
// first refused connection, try again with back-off for a bounded time, then
// give up with one line that says what was tried.
import { setTimeout as sleep } from 'node:timers/promises';
import { StartupError } from '../startup-error.js';
import { isDatabaseUnavailable } from './errors.js';

export interface WaitOptions {
  /** Seconds to keep trying; 0 tries once. */
  timeoutSeconds: number;
  /** The database as logs may show it: host, port and name, never the password. */
  target: string;
  /** Called before each wait, so every failed attempt is one log line. */
  onRetry(attempt: { attempt: number; reason: string; retryInMs: number }): void;
  /** First pause; it doubles up to `maxDelayMs`. */
  firstDelayMs?: number;
  maxDelayMs?: number;
}

class NoAnswer extends Error {
  constructor(ms: number) {
    super(`no answer within ${Math.round(ms / 1000)} s`);
  }
}

/** `host:port/name` of a postgresql:// URL, without user or password. */
export function describeDatabase(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || 5432}${parsed.pathname}`;
}

/** The driver's one-line reason ("Can't reach database server at ..."), without Prisma's call-site preamble. */
function reasonOf(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return /Message: `(.*)`/.exec(message)?.[1] ?? message.trim().split('\n').at(-1) ?? '';
}

/**
 * What to do about a refusal an operator fixes once: a database not created
 * yet is the usual one on a machine of one's own (the compose file's
 * PostgreSQL creates it from POSTGRES_DB).
 */
function adviceFor(reason: string, target: string): string {
  const missing = /database "(.+)" does not exist/.exec(reason)?.[1];
  if (missing === undefined) return '';
  const [, host, port] = /^(.*):(\d+)\//.exec(target) ?? [];
  const where = host ? ` -h ${host.replace(/^\[|\]$/g, '')} -p ${port}` : '';
  return `; create it: createdb${where} ${missing.includes(' ') ? `'${missing}'` : missing} (as the URL's user, or one allowed to create databases)`;
}

/**
 * Runs `probe` (a trivial query) until it succeeds. Failures that mean "not
 * there yet" are retried until `timeoutSeconds` have passed; any other
 * failure (wrong password, no such database) ends the wait at once. Either
 * way the error is a StartupError: one line, no stack trace.
 */
export async function waitForDatabase(probe: () => Promise<unknown>, options: WaitOptions): Promise<void> {
  const deadline = Date.now() + options.timeoutSeconds * 1000;
  const maxDelay = options.maxDelayMs ?? 5000;
  let delay = options.firstDelayMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    // A host that drops packets leaves a connect hanging for minutes: the
    // attempt gets only the time that is left (at least a second).
    const limit = Math.max(1000, deadline - Date.now());
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new NoAnswer(limit)), limit).unref();
    });
    try {
      await Promise.race([probe(), timedOut]);
      return;
    } catch (err) {
      const reason = reasonOf(err);
      const retryable = err instanceof NoAnswer || isDatabaseUnavailable(err);
      if (!retryable) throw new StartupError(`cannot use the database at ${options.target}: ${reason}${adviceFor(reason, options.target)}`);
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new StartupError(
          `database at ${options.target} not reachable after ${options.timeoutSeconds} s (${attempt} attempt${attempt > 1 ? 's' : ''}): ${reason}; DATABASE_CONNECT_TIMEOUT sets how long to wait`,
        );
      }
      const retryInMs = Math.min(delay, left);
      options.onRetry({ attempt, reason, retryInMs });
      await sleep(retryInMs);
      delay = Math.min(delay * 2, maxDelay);
    } finally {
      clearTimeout(timer);
    }
  }
}
