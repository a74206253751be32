// Cost of one request log line, before and after dropping wildcard
// redaction and writing asynchronously in batches:
//
//   npx tsx bench/log-line.ts [lines] | cat > /dev/null
//
// Lines go to stdout (a pipe, as under Docker or systemd); the results to
// stderr. One line per event-loop turn, as requests log; the cost is the CPU
// time of the whole process (main thread and libuv's threads) per line,
// minus the same loop without logging. Medians of 5 rounds, alternating.
import { randomUUID } from 'node:crypto';
import { pino, type Logger } from 'pino';
import { createLogger } from '../src/server.js';

if (process.stdout.isTTY) {
  console.error('pipe stdout away: npx tsx bench/log-line.ts | cat > /dev/null');
  process.exit(2);
}

// The logger as it was: wildcard redaction on every line, one synchronous write per line.
const FORMER_REDACT = ['req.headers.authorization', '*.authorization', '*.api_key', '*.apiKey', '*.token', '*.adminToken'];
const variants: Record<string, (() => Logger) | null> = {
  'no logging': null,
  'before (redact, sync)': () => pino({ level: 'info', base: undefined, redact: FORMER_REDACT }),
  'after (createLogger)': () => createLogger('info', 'json'),
};

const lines = Number(process.argv[2] ?? 50_000);
const id = randomUUID();
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function cpuPerLine(logger: Logger | null): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < lines; i++) {
    logger?.info({ req_id: id, method: 'GET', route: '/api/v1/files/:id', status: 200, account_id: 42, bytes_in: 312, bytes_out: 287, ms: 1.7 }, 'request');
    await turn();
  }
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / lines;
}

const results = new Map<string, number[]>();
for (let round = 0; round < 5; round++) {
  for (const [name, make] of Object.entries(variants)) {
    const logger = make?.() ?? null;
    await cpuPerLine(logger); // warm-up
    results.set(name, [...(results.get(name) ?? []), await cpuPerLine(logger)]);
    if (logger) await new Promise<void>((resolve) => logger.flush(() => resolve()));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const floor = median(results.get('no logging')!);
for (const [name, ns] of results) {
  if (name === 'no logging') continue;
  console.error(`${name.padEnd(24)} ${(median(ns) - floor).toFixed(0).padStart(6)} ns of CPU per line (rounds: ${ns.map((n) => (n - floor).toFixed(0)).join(', ')})`);
}
