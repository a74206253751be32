// An answer given before the request's body was read to the end (a refused
// upload, a tus PATCH that gave way to a newer one, a body cut for being too
// slow) closes its connection: reading on would only drain a body nobody
// keeps, possibly gigabytes of it, and a client told keep-alive would send
// its next request into those unread bytes.
//
// Not at once: closing a socket with unread bytes sends a TCP reset, and a
// reset can make the client drop the answer it has not read yet (it sees
// ECONNRESET instead of our 408 or 413). So the close lingers, as nginx's
// does: the answer says `Connection: close`, our side of the connection is
// ended after it, and what the client still sends is read and dropped for a
// moment (up to DRAIN_BYTES) so the answer can arrive; then the socket goes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';

/** How long a client that is still sending gets to read our answer before its connection is closed. */
const GRACE_MS = 1000;

/** The most of a refused body read and dropped meanwhile; past it the client blocks on a full window. */
const DRAIN_BYTES = 1024 * 1024;

/**
 * Call before the answer is written, when `req` has not been read to its
 * end. A small body (a Content-Length within DRAIN_BYTES) is read and
 * dropped instead, and the connection kept: its client may well have sent it
 * all already and be about to send its next request on it.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  const closing = String(res.getHeader('Connection') ?? '').toLowerCase() === 'close';
  if (!closing && Number(req.headers['content-length']) <= DRAIN_BYTES) {
    req.unpipe();
    req.on('data', () => {});
    req.on('error', () => {});
    req.resume();
    return;
  }
  res.shouldKeepAlive = false;
  const socket = req.socket;
  // Node ends a `Connection: close` response with socket.destroySoon(),
  // which destroys as soon as the answer is flushed: the reset above.
  socket.destroySoon = function linger() {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), GRACE_MS).unref();
    socket.once('close', () => clearTimeout(timer));
    let drained = 0;
    // A body stream nobody read (detachableBody, a PATCH refused before its
    // body) would take the data and pause the request again at once.
    req.unpipe();
    req.on('data', (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > DRAIN_BYTES) req.pause();
    });
    req.on('error', () => {});
    req.resume();
  };
}

/**
 * The request's body as a stream of its own, for a reader that may stop
 * early (a tus PATCH too slow, or giving way to a newer request): destroying
 * it stops the reading and leaves the request, and so the connection, to
 * carry the answer. Destroying the request itself would destroy its socket.
 * A client that hangs up ends it with the request's error.
 */
export function detachableBody(req: IncomingMessage): Readable {
  const body = new PassThrough();
  // A client can hang up before the reader has started (the PATCH waits
  // for its lease): the reader still sees the error, and it is not thrown.
  body.on('error', () => {});
  // Not stream.pipeline (as in multipart.ts): on a stop it would destroy the
  // request, and with it the connection that must carry the answer.
  req.pipe(body);
  const hungUp = (err?: Error) => {
    if (!req.complete) body.destroy(err ?? new Error('the client closed the connection'));
  };
  req.once('error', hungUp);
  req.once('close', () => hungUp());
  body.once('close', () => {
    req.off('error', hungUp);
    // The answer (closeAfterAnswer) reads or drops the rest, not us.
    req.unpipe(body);
  });
  return body;
}
