// Cuts transfers that move too slowly, so a client trickling a byte now and
// then cannot hold what its transfer holds for as long as it likes: an
// upload's slot and part buffer, a download's store stream and, on a link
// with max_downloads, the bytes reserved against the link's budget (which
// keep other clients at 410 while held). IDLE_TIMEOUT only catches a silent
// connection.
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface BodyRateOptions {
  /** Bytes per second the body must average... */
  minRate: number;
  /** ...over every span of this many seconds. */
  windowSeconds: number;
}

interface Transfer {
  /** Bytes moved so far. */
  moved(): number;
  /** Whether we are the slow side now (the client is not to blame for this moment). */
  heldByUs(): boolean;
  /** Whether the transfer is over (watching stops). */
  over(): boolean;
}

/**
 * When the last `windowSeconds` moved fewer than minRate × windowSeconds
 * bytes of `transfer`, `onSlow` runs once. Time during which we are the
 * slow side starts the window again. The returned function stops watching.
 */
function watchRate(transfer: Transfer, options: BodyRateOptions, onSlow: () => void): () => void {
  if (options.minRate <= 0) return () => {};
  const windowMs = options.windowSeconds * 1000;
  const needed = options.minRate * options.windowSeconds;
  const tickMs = Math.max(100, Math.min(1000, windowMs / 10));
  // Samples of (time, bytes moved so far), oldest first, reaching back one window.
  let samples: { at: number; bytes: number }[] = [{ at: Date.now(), bytes: transfer.moved() }];
  const timer = setInterval(() => {
    if (transfer.over()) return stop();
    const now = Date.now();
    const sample = { at: now, bytes: transfer.moved() };
    if (transfer.heldByUs()) {
      samples = [sample];
      return;
    }
    samples.push(sample);
    while (samples.length > 1 && samples[1]!.at <= now - windowMs) samples.shift();
    const first = samples[0]!;
    if (now - first.at >= windowMs && sample.bytes - first.bytes < needed) {
      stop();
      onSlow();
    }
  }, tickMs).unref();
  const stop = () => clearInterval(timer);
  return stop;
}

/**
 * Whether we hold the body of `req` back: its buffer is full because the
 * handler is not reading (our store is the slow side), so Node has stopped
 * reading the socket. The client is not to blame for silence meanwhile.
 */
export const bodyHeldBack = (req: IncomingMessage) => req.readableLength >= req.readableHighWaterMark;

/**
 * Watches the body of `req` from now on, by its socket's bytes read (so it
 * reads nothing itself). We are the slow side while we hold the body back.
 * Call the returned function when the body is done with.
 */
export function watchBodyRate(req: IncomingMessage, options: BodyRateOptions, onSlow: () => void): () => void {
  return watchRate(
    {
      moved: () => req.socket?.bytesRead ?? 0,
      heldByUs: () => bodyHeldBack(req),
      over: () => req.complete || req.destroyed,
    },
    options,
    onSlow,
  );
}

/**
 * Watches the body of `res` from now on, by its socket's bytes written to
 * the kernel, which grow only as fast as the client reads once the socket's
 * buffers are full. We are the slow side while nothing waits to be sent
 * (the store has not delivered the next bytes yet).
 */
export function watchResponseRate(res: ServerResponse, options: BodyRateOptions, onSlow: () => void): () => void {
  return watchRate(
    {
      moved: () => res.socket?.bytesWritten ?? 0,
      // The response's writableLength counts its socket's buffer too.
      heldByUs: () => res.writableLength === 0,
      over: () => res.writableFinished || res.destroyed,
    },
    options,
    onSlow,
  );
}
