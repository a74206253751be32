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
  return { logger, lines, raw, requests: () => lines.filter((l) => l.msg === 'request') };
}
