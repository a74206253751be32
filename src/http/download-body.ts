import { pipeline, Transform, type Readable } from 'node:stream';
import { ObjectStoreError } from '../storage/object-store.js';

/** A download's body, and how many of its bytes it has handed on so far (for a limited link's budget). */
export type ExactBody = Transform & { passed: number };

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
export function exactBody(source: Readable, length: number): ExactBody {
  let sourceFailed = false;
  const body: ExactBody = Object.assign(new Transform({
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
  }), { passed: 0 });
  // Registered before pipeline's own listeners, so when pipeline fails
  // `body` because of the store's stream (an error, or a close before its
  // end), the failure is known to be the store's.
  source.once('error', () => (sourceFailed = true));
  source.once('close', () => (sourceFailed ||= !source.readableEnded));
  pipeline(source, body, () => {});
  return body;
}
