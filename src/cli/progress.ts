// A one-line progress display for `dropstream upload` and `download`: bytes
// are counted by a pass-through Transform in the transfer's pipeline, and a
// timer redraws the line on stderr at most every `intervalMs`.
import { Transform } from 'node:stream';

export interface ProgressSnapshot {
  /** Bytes transferred so far. */
  done: number;
  /** Bytes expected in all; undefined when the size is not known (no Content-Length). */
  total?: number;
  /** Time since the transfer started. */
  elapsedMs: number;
  /** The offset a resumable upload last continued from after a cut connection. */
  resumedAt?: number;
  /** Set while a resumable upload waits to retry or to catch up: e.g. `retry in 5 s`, `7.3 MB stored`. */
  waiting?: string;
}

const UNITS = ['B', 'kB', 'MB', 'GB', 'TB'];

/** Decimal units, like the MB/s of the rate: `999 B`, `3.1 MB`, `5.4 GB`. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  // 999.95 would print as 1000.0; move up a unit instead.
  while (value >= (unit === 0 ? 1000 : 999.95) && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}

/** `m:ss`, or `h:mm:ss` from an hour on. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  const pad = (n: number) => String(n).padStart(2, '0');
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  return hours > 0 ? `${hours}:${pad(minutes)}:${pad(s % 60)}` : `${minutes}:${pad(s % 60)}`;
}

/**
 * The progress line, e.g. `1.6 MB / 3.1 MB  50%  12.4 MB/s  ETA 0:01`.
 * Without a total: bytes and rate only. The rate is the average since the start.
 */
export function formatProgress({ done, total, elapsedMs, resumedAt, waiting }: ProgressSnapshot): string {
  // Waiting: what was sent before the cut and that it waits; no rate or ETA, which would only fall.
  if (waiting !== undefined) {
    const percent = total ? `  ${Math.min(100, Math.floor((done * 100) / total))}%` : '';
    return `${formatBytes(done)} sent${total === undefined ? '' : ` / ${formatBytes(total)}`}${percent}  waiting to resume (${waiting})`;
  }
  const rate = elapsedMs > 0 ? done / (elapsedMs / 1000) : undefined;
  const rateText = rate === undefined ? '-- MB/s' : `${(rate / 1e6).toFixed(1)} MB/s`;
  const resumed = resumedAt === undefined ? '' : `  (resumed at ${formatBytes(resumedAt)})`;
  if (total === undefined) return `${formatBytes(done)}  ${rateText}${resumed}`;
  // Floored, so 100% means finished.
  const percent = total === 0 ? 100 : Math.min(100, Math.floor((done * 100) / total));
  const remaining = Math.max(0, total - done);
  const eta = remaining === 0 ? formatDuration(0) : rate ? formatDuration(remaining / rate) : '--:--';
  return `${formatBytes(done)} / ${formatBytes(total)}  ${percent}%  ${rateText}  ETA ${eta}${resumed}`;
}

export interface ProgressOptions {
  /** Draw the line; when false, bytes are still counted. */
  enabled: boolean;
  total?: number;
  /** Where the line goes (stderr, so stdout stays clean for scripts). */
  out?: NodeJS.WritableStream;
  /** Least time between redraws. */
  intervalMs?: number;
  now?: () => number;
}

export interface Progress {
  /** Pass-through stream that counts the bytes flowing through it. */
  counter: Transform;
  /** Bytes counted so far. */
  bytes(): number;
  /** Sets the count (for clients that report progress themselves, like tus-js-client). */
  update(done: number): void;
  /** The server has `offset` stored and the transfer continues from there; the line stays until the count passes what it showed. */
  resumed(offset: number): void;
  /** Shows that the transfer waits to resume (`why`); counts reported meanwhile are not shown. */
  waiting(why: string): void;
  /** Prints a line of its own above the progress line (always, even when the line is not drawn). */
  note(line: string): void;
  /** Draws the final state and ends the line (if enabled); stops the timer. Idempotent. */
  finish(): void;
}

export function createProgress({ enabled, total, out = process.stderr, intervalMs = 100, now = Date.now }: ProgressOptions): Progress {
  const started = now();
  let done = 0;
  let resumedAt: number | undefined;
  let waitingFor: string | undefined;
  let lastWidth = 0;
  let finished = false;

  const draw = () => {
    const line = formatProgress({ done, total, elapsedMs: now() - started, resumedAt, waiting: waitingFor });
    // \r and padding rather than terminal escapes: the output may be a file or a pipe (--progress).
    out.write(`\r${line}${' '.repeat(Math.max(0, lastWidth - line.length))}`);
    lastWidth = line.length;
  };

  const timer = enabled ? setInterval(draw, intervalMs) : undefined;
  timer?.unref();

  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      done += chunk.length;
      callback(null, chunk);
    },
  });

  return {
    counter,
    bytes: () => done,
    update(value) {
      // Below what the line shows, a count is a request starting over from
      // the stored offset, not bytes lost: keep the line until it passes.
      if (value < done) return;
      if (waitingFor?.startsWith('resuming')) waitingFor = undefined;
      if (waitingFor !== undefined) return;
      done = value;
    },
    resumed(offset) {
      // The line stays where it was until the new request passes it (never a
      // restart from a lower count), saying what the server has stored.
      if (offset > 0) resumedAt = offset;
      if (offset >= done) {
        done = offset;
        waitingFor = undefined;
      } else waitingFor = `resuming from ${formatBytes(offset)} stored`;
    },
    waiting(why) {
      waitingFor = why;
    },
    note(text) {
      if (!timer) {
        out.write(`${text}\n`);
        return;
      }
      out.write(`\r${text}${' '.repeat(Math.max(0, lastWidth - text.length))}\n`);
      lastWidth = 0;
      draw();
    },
    finish() {
      if (finished) return;
      finished = true;
      if (!timer) return;
      clearInterval(timer);
      draw();
      out.write('\n');
    },
  };
}
