import { pipeline, Transform, type Readable } from 'node:stream';
import { ObjectStoreError } from '../storage/object-store.js';
import type { PooledRead, PooledSink } from '../storage/pooled-read.js';

/** A download's body, and how many of its bytes it has handed on so far (for a limited link's budget). */
export type ExactBody = Transform & {
  passed: number;
  /**
   * Bytes of the body the client acknowledged, as last measured (with
   * `acked`; without it, or before a measure succeeded, `passed`).
   */
  readonly acknowledged: number;
  /** Measures `acknowledged` now (before the connection closes: a closed socket cannot be read). */
  measure(): number;
};

/**
 * The body of a download: the store's stream, ended the moment the
 * `length` bytes the headers promised have passed, not when the store's
 * stream reports its own end.
 *
 * That is what makes complete downloads count. The response can only finish
 * after Koa sees the body end and calls `res.end()`. Under backpressure the
 * store's stream is paused with its last bytes already handed on, and learns
 * it is at the end only after the socket drains (a file read returning 0
 * bytes, through the thread pool). A client that closes as soon as it has
 * the last byte (curl does) often closed first: the response got 'close'
 * without 'finish' and the download went uncounted (10 curl downloads of
 * 64 MiB counted 4 to 7). Ended here, `res.end()` follows the last write
 * within the same tick, before any close from the client can be read.
 *
 * A stream that fails, or ends short, fails the body with ObjectStoreError
 * (503 store_unavailable, counted in store_errors); bytes past `length` are
 * dropped, so the response never says more than its Content-Length.
 */
export function exactBody(source: Readable, length: number, acked?: () => number | undefined): ExactBody {
  let sourceFailed = false;
  const meter = acknowledgedMeter(() => body.passed, acked);
  const transform = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const room = length - body.passed;
      if (room <= 0) return done();
      body.passed += Math.min(chunk.length, room);
      if (chunk.length < room) return done(null, chunk);
      this.push(chunk.length === room ? chunk : chunk.subarray(0, room));
      this.push(null);
      done();
    },
    flush(done) {
      done(body.passed < length ? new ObjectStoreError(`the object ended ${length - body.passed} bytes short`) : null);
    },
    destroy(err, done) {
      // The store's own failure is named as one; the response's (a client that left) is passed on as it is.
      done(err && sourceFailed && !(err instanceof ObjectStoreError) ? new ObjectStoreError('reading from the object store failed', { cause: err }) : err);
    },
  });
  // defineProperties, not Object.assign: assign would copy the getter's value once.
  const body = Object.defineProperties(transform, {
    passed: { value: 0, writable: true },
    acknowledged: { get: () => meter.acknowledged },
    measure: { value: () => meter.measure() },
  }) as ExactBody;
  // Registered before pipeline's own listeners, so when pipeline fails
  // `body` because of the store's stream (an error, or a close before its
  // end), the failure is known to be the store's.
  source.once('error', () => (sourceFailed = true));
  source.once('close', () => (sourceFailed ||= !source.readableEnded));
  pipeline(source, body, () => {});
  return body;
}

/** What a body handed on and what of it the client acknowledged (see ExactBody). */
export interface Measured {
  readonly acknowledged: number;
  measure(): number;
}

/** Bytes acknowledged as last measured by `acked`: never more than `passed()`, never less than measured before; `passed()` without a measure. */
function acknowledgedMeter(passed: () => number, acked?: () => number | undefined): Measured {
  let acknowledged: number | undefined;
  return {
    get acknowledged() {
      return acknowledged ?? passed();
    },
    measure() {
      const now = acked?.();
      if (now !== undefined) acknowledged = Math.max(acknowledged ?? 0, Math.min(Math.max(now, 0), passed()));
      return acknowledged ?? passed();
    },
  };
}

/**
 * The body of a download read into reused buffers (PooledRead): `length`
 * bytes written straight to `sink` (the response), each write's callback
 * giving its buffer back, the sink ended with the last byte as exactBody
 * does. `onFail` hears of a store failure (ObjectStoreError) after which
 * nothing more is written: cut the response there.
 */
export function pooledBody(read: PooledRead, acked?: () => number | undefined): Measured & { send(sink: PooledSink, length: number, onFail: (err: Error) => void): void } {
  const meter = acknowledgedMeter(() => read.passed, acked);
  return {
    get acknowledged() {
      return meter.acknowledged;
    },
    measure: () => meter.measure(),
    send: (sink, length, onFail) => read.sendTo(sink, length, onFail),
  };
}
