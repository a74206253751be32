// The server's own logger (createLogger) writing into memory, so a test
// reads exactly the lines an operator would see on stdout.
import type { LevelWithSilent, Logger } from 'pino';
import { createLogger } from '../../src/server.js';

export interface LogLine {
  level: number;
  msg?: string;
  [field: string]: unknown;
}

export interface CapturedLog {
  logger: Logger;
  /** Every line so far, parsed. */
  lines: LogLine[];
  /** Every line so far, as written. */
  raw: string[];
  /** The request log lines (msg "request"). */
  requests(): LogLine[];
  /**
   * The request lines on `route` written after the first `mark` request
   * lines, once there are `count` of them. A request's line is written when
   * its response closes, the last thing it does, so a test that has it can
   * check that nothing else happened without sleeping. Throws after `ms`.
   */
  requestsAfter(mark: number, route: string, count?: number, ms?: number): Promise<LogLine[]>;
}

export function captureLog(level: LevelWithSilent = 'info'): CapturedLog {
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const logger = createLogger(level, 'json', {
    write(line: string) {
      raw.push(line);
      lines.push(JSON.parse(line) as LogLine);
    },
  });
  const requests = () => lines.filter((l) => l.msg === 'request');
  async function requestsAfter(mark: number, route: string, count = 1, ms = 10_000): Promise<LogLine[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = requests().slice(mark).filter((l) => l.route === route);
      if (found.length >= count) return found;
      if (Date.now() > deadline) throw new Error(`${found.length} of ${count} request lines on ${route} after ${ms} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  return { logger, lines, raw, requests, requestsAfter };
}
