// Deadlines of store calls. A store that accepts connections but never
// answers (Ceph RGW full hangs writes rather than failing them) must not
// hold an upload slot, a tus lease or a sweep for ever: every call gets a
// deadline sized to its work, and its firing is a store failure like any
// other (503 store_unavailable, counted, the upload cleaned up).
import type { Readable } from 'node:stream';
import { StoreTimeoutError } from './store-errors.js';

export interface StoreDeadlines {
  /** Milliseconds for a call without a body to send: a HEAD, a DELETE, creating, completing or aborting a multipart upload, a listing; and the first byte of a read. */
  callMs: number;
  /** The slowest rate (bytes/s) a write of a part or an object may run at: a write of n bytes may take callMs + n / minRate seconds. */
  minRate: number;
  /** Milliseconds a read may wait for its next bytes while we ask for them. */
  readIdleMs: number;
}

/** The deadlines when nothing is configured (config.ts has the same defaults). */
export const DEFAULT_DEADLINES: StoreDeadlines = { callMs: 10_000, minRate: 512 * 1024, readIdleMs: 30_000 };

/** What a store reports of every call (the server turns it into metrics and readiness). */
export type StoreCallObserver = (operation: string, outcome: 'ok' | 'timeout' | 'failed') => void;

/** How long a write of `bytes` may take. */
export const writeDeadline = (d: StoreDeadlines, bytes: number) => d.callMs + Math.ceil((bytes / d.minRate) * 1000);

/**
 * Runs `work` with a signal that aborts after `ms`; rejects with
 * StoreTimeoutError(operation) when it did. `work` must give up when the
 * signal fires (an fs call cannot be cancelled: then this answers at the
 * deadline and the call finishes, or not, on its own).
 */
export async function withDeadline<T>(operation: string, ms: number, work: (signal: AbortSignal) => Promise<T>, observe?: StoreCallObserver): Promise<T> {
  const controller = new AbortController();
  const timeout = new StoreTimeoutError(operation, ms);
  let timer: NodeJS.Timeout | undefined;
  const fired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort(timeout);
      reject(timeout);
    }, ms);
  });
  fired.catch(() => undefined);
  try {
    const result = await Promise.race([work(controller.signal), fired]);
    observe?.(operation, 'ok');
    return result;
  } catch (err) {
    if (controller.signal.aborted) {
      observe?.(operation, 'timeout');
      throw timeout;
    }
    observe?.(operation, 'failed');
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `source` itself, destroyed with StoreTimeoutError when it receives nothing
 * for `ms` while its consumer wants more. The stream form of idleBounded,
 * for a body piped on as it is (a download): no async iteration, no promise
 * and no new timer per chunk, only a refresh of one timer on each push (a
 * 'data' listener would start the stream flowing before anyone reads it).
 * When the timer fires while the consumer does not read (the stream not
 * flowing, or its buffer full), the consumer is the slow one (a download to
 * a slow client), and the clock starts again.
 */
export function idleTimed<T extends Readable>(source: T, operation: string, ms: number, observe?: StoreCallObserver): T {
  const timer = setTimeout(() => {
    if (source.destroyed || source.readableEnded) return;
    if (source.readableFlowing !== true || source.readableLength >= source.readableHighWaterMark) {
      timer.refresh();
      return;
    }
    observe?.(operation, 'timeout');
    source.destroy(new StoreTimeoutError(operation, ms));
  }, ms);
  timer.unref();
  const push = source.push;
  source.push = function (chunk: unknown, encoding?: BufferEncoding) {
    timer.refresh();
    return push.call(this, chunk, encoding);
  };
  source.once('close', () => clearTimeout(timer));
  return source;
}

/**
 * Yields what `source` yields, failing with StoreTimeoutError when the next
 * chunk takes longer than `ms` to come. The clock runs only while the
 * consumer waits for a chunk: a slow reader downstream (a download to a slow
 * client) pauses it, so only the store's silence counts.
 */
export async function* idleBounded(
  source: AsyncIterable<Buffer> & { destroy?: (err?: Error) => void },
  operation: string,
  ms: number,
  observe?: StoreCallObserver,
): AsyncGenerator<Buffer> {
  const iterator = source[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new StoreTimeoutError(operation, ms);
  try {
    for (;;) {
      const fired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timeout), ms)));
      const next = await Promise.race([iterator.next(), fired]).catch((err: unknown) => {
        if (err === timeout) observe?.(operation, 'timeout');
        throw err;
      });
      clearTimeout(timer);
      if (next.done) return;
      yield next.value;
    }
  } finally {
    clearTimeout(timer);
    // Ends the request under the source (its socket) whether it ended, failed or timed out.
    source.destroy?.();
  }
}
