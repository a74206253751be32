// Cuts upload bodies that arrive too slowly, so a client trickling a byte
// now and then cannot hold an upload slot (and a part buffer) for as long
// as it likes. IDLE_TIMEOUT only catches a silent connection.
import type { IncomingMessage } from 'node:http';

export interface BodyRateOptions {
  /** Bytes per second the body must average... */
  minRate: number;
  /** ...over every span of this many seconds. */
  windowSeconds: number;
}

/**
 * Watches `req` from now on, by its socket's bytes read (so it reads nothing
 * itself). When the last `windowSeconds` brought fewer than
 * minRate × windowSeconds bytes, `onSlow` runs once. Time during which we
 * hold the body back (our store is the slow side: the request's buffer is
 * full) does not count against the client. Call the returned function when
 * the body is done with.
 */
export function watchBodyRate(req: IncomingMessage, options: BodyRateOptions, onSlow: () => void): () => void {
  if (options.minRate <= 0) return () => {};
  const windowMs = options.windowSeconds * 1000;
  const needed = options.minRate * options.windowSeconds;
  const tickMs = Math.max(100, Math.min(1000, windowMs / 10));
  const bytes = () => req.socket?.bytesRead ?? 0;
  // Samples of (time, bytes read so far), oldest first, reaching back one window.
  let samples: { at: number; bytes: number }[] = [{ at: Date.now(), bytes: bytes() }];
  const timer = setInterval(() => {
    if (req.complete || req.destroyed) return stop();
    const now = Date.now();
    const sample = { at: now, bytes: bytes() };
    if (req.readableLength >= req.readableHighWaterMark) {
      // Backpressure from our side: start the window again.
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

