import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import { AppError, badRequest } from '../errors.js';

/** Field name of the one file part an upload carries (the spec's `file`). */
export const FILE_FIELD = 'file';

// Bounds on everything in a body that is not the file itself, so a body of
// thousands of fields or giant part headers costs us nothing. Refused: more
// than 50 fields or 60 parts. busboy signals `fieldsLimit` when a field
// beyond the limit starts, but `partsLimit` as soon as the count reaches
// the limit, hence the one part more.
const MAX_PARTS = 60;
const LIMITS = { fields: 50, fieldSize: 64 * 1024, parts: MAX_PARTS + 1, headerPairs: 50 };

const ignore = () => {};

const clientGone = () => new AppError(400, 'upload_aborted', 'The request body ended before the upload was complete');

/**
 * Reads a multipart/form-data request that must hold exactly one file part,
 * named `file`, and hands that part's stream to `onFile` as it arrives.
 * Resolves once the body is fully read and `onFile` has resolved, if the
 * connection is still open to carry the answer. On any
 * problem the file stream is destroyed (so its consumer fails and cleans up)
 * and it rejects once `onFile` has settled; the request is left unread so
 * the caller can answer and close the connection.
 */
export function receiveFile(req: IncomingMessage, onFile: (filename: string, stream: Readable) => Promise<void>): Promise<void> {
  // The connection can close while the caller is still busy (checking the
  // key, taking a quota slot): the request has then emitted 'close' already,
  // and waiting for its body would wait forever.
  if (req.destroyed) return Promise.reject(clientGone());
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers, defParamCharset: 'utf8', limits: LIMITS });
  } catch {
    return Promise.reject(badRequest('invalid_multipart', 'Expected a multipart/form-data body with a boundary'));
  }

  return new Promise((resolve, reject) => {
    let handling: Promise<void> | undefined;
    let fileStream: Readable | undefined;
    let failed = false;

    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      req.unpipe(parser);
      parser.destroy();
      fileStream?.destroy(err as Error);
      const settled = handling ?? Promise.resolve();
      settled.then(() => reject(err), () => reject(err));
    };

    parser.on('file', (name, stream, info) => {
      // Errors of a part's stream reach us through onFile or the parser; a
      // part nobody reads must still not crash the process when destroyed.
      stream.on('error', ignore);
      if (failed) return void stream.resume();
      if (name !== FILE_FIELD) {
        stream.resume();
        return fail(badRequest('unexpected_file_part', `Only one file part, named "${FILE_FIELD}", is accepted`));
      }
      if (handling) {
        stream.resume();
        return fail(badRequest('multiple_files', `Exactly one file part named "${FILE_FIELD}" is accepted`));
      }
      fileStream = stream;
      handling = onFile(info.filename ?? '', stream);
      handling.catch(fail);
    });
    parser.on('field', (name) => {
      if (name === FILE_FIELD) fail(badRequest('missing_file', `The part "${FILE_FIELD}" must be a file, with a filename`));
    });
    const tooMany = () => fail(badRequest('too_many_parts', 'The multipart body has too many parts'));
    parser.on('partsLimit', tooMany);
    parser.on('fieldsLimit', tooMany);
    parser.on('error', (err: Error) => fail(badRequest('invalid_multipart', `Malformed multipart body: ${err.message}`)));
    parser.on('close', () => {
      if (failed) return;
      if (!handling) return fail(badRequest('missing_file', `A file part named "${FILE_FIELD}" is required`));
      // A connection already closed cannot carry our answer: the client hung
      // up after its last byte, or sent bytes after the body that Node
      // answered with its own 400 before closing. Either way the client will
      // never see a 201, so the upload must not be kept.
      handling.then(() => (req.socket.destroyed ? fail(clientGone()) : resolve()), fail);
    });
    req.on('close', () => {
      // Not only a body cut short: a complete one destroyed before it was
      // read (its connection closed) will never reach the parser either.
      if (!req.readableEnded) fail(clientGone());
    });
    // The request's errors are its connection's (ECONNRESET "aborted"): a
    // client that left, which is routine and answered as such, not a failure of ours.
    req.on('error', () => fail(clientGone()));
    // Not stream.pipeline: on failure it would destroy the request, and with
    // it the socket that must still carry our error response. Errors and
    // hang-ups of both sides are handled above instead.
    req.pipe(parser);
  });
}
