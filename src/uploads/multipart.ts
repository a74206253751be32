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

const clientGone = () => new AppError('upload_aborted', 'The request body ended before the upload was complete');

const notMultipart = (type: string | undefined) =>
  badRequest(
    'invalid_multipart',
    `Uploads are multipart/form-data with one file part named "${FILE_FIELD}" (this body is ${type ? type.split(';')[0]!.trim().slice(0, 100) : 'without a Content-Type'}); ` +
      `with curl: -F "${FILE_FIELD}=@report.pdf", not --data-binary. For resumable uploads use POST /api/v1/uploads (tus)`,
  );

/** The text fields that came before the file part; a name sent twice, or a value cut at the size limit, is kept as an array or `TRUNCATED` (not a string: options refuse it). */
export type Fields = Map<string, string | string[] | typeof TRUNCATED>;
export const TRUNCATED = Symbol('truncated');

/** Hands the file part's stream on, with the text fields sent before it. */
export type OnFile = (filename: string, stream: Readable, fields: Fields) => Promise<void>;

/**
 * Reads a multipart/form-data request that must hold exactly one file part,
 * named `file`, and hands that part's stream to `onFile` as it arrives,
 * with the text fields that came before it. A field after the file part is
 * refused (400 field_after_file): the file is streamed into storage as it
 * arrives, so whatever applies to it must be known first.
 * Resolves once the body is fully read and `onFile` has resolved, if the
 * connection is still open to carry the answer. On any
 * problem the file stream is destroyed (so its consumer fails and cleans up)
 * and it rejects once `onFile` has settled; the request is left unread so
 * the caller can answer and close the connection. Aborting `cut` fails it
 * the same way, with the signal's reason.
 */
export function receiveFile(req: IncomingMessage, onFile: OnFile, cut?: AbortSignal): Promise<void> {
  // The connection can close while the caller is still busy (checking the
  // key, taking a quota slot): the request has then emitted 'close' already,
  // and waiting for its body would wait forever.
  if (req.destroyed) return Promise.reject(clientGone());
  // busboy parses urlencoded bodies too, so `curl --data-binary @file` (which
  // sends application/x-www-form-urlencoded) was answered "Malformed
  // urlencoded form": say what an upload is, and how curl sends one.
  const type = req.headers['content-type'];
  if (!/^multipart\/form-data\s*(;|$)/i.test(type ?? '')) return Promise.reject(notMultipart(type));
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers, defParamCharset: 'utf8', limits: LIMITS });
  } catch {
    return Promise.reject(badRequest('invalid_multipart', 'Expected a multipart/form-data body with a boundary'));
  }

  return new Promise((resolve, reject) => {
    const body = new OneFileBody(req, parser, onFile, resolve, reject);
    listenToParser(parser, body);
    listenToRequest(req, body, cut);
    // Not stream.pipeline: on failure it would destroy the request, and with
    // it the socket that must still carry our error response. Errors and
    // hang-ups of both sides are handled by the listeners instead.
    req.pipe(parser);
  });
}

function listenToParser(parser: busboy.Busboy, body: OneFileBody): void {
  parser.on('file', body.filePart);
  parser.on('field', body.field);
  const tooMany = () => body.fail(badRequest('too_many_parts', 'The multipart body has too many parts'));
  parser.on('partsLimit', tooMany);
  parser.on('fieldsLimit', tooMany);
  parser.on('error', (err: Error) => body.fail(badRequest('invalid_multipart', `Malformed multipart body: ${err.message}`)));
  parser.on('close', body.parsed);
}

function listenToRequest(req: IncomingMessage, body: OneFileBody, cut: AbortSignal | undefined): void {
  req.on('close', () => {
    // Not only a body cut short: a complete one destroyed before it was
    // read (its connection closed) will never reach the parser either.
    if (!req.readableEnded) body.fail(clientGone());
  });
  // The request's errors are its connection's (ECONNRESET "aborted"): a
  // client that left, which is routine and answered as such, not a failure of ours.
  req.on('error', () => body.fail(clientGone()));
  // The body is not wanted any more (too slow): fail with the reason given.
  cut?.addEventListener('abort', () => body.fail(cut.reason), { once: true });
}

/** One body being read: its one file part, handed to `onFile`, and whether it failed. */
class OneFileBody {
  /** onFile's work on the file part, once it started. */
  private handling: Promise<void> | undefined;
  private fileStream: Readable | undefined;
  private failed = false;
  private readonly fields: Fields = new Map();

  constructor(
    private readonly req: IncomingMessage,
    private readonly parser: busboy.Busboy,
    private readonly onFile: OnFile,
    private readonly resolve: () => void,
    private readonly reject: (err: unknown) => void,
  ) {}

  /** Stops reading, destroys the file stream, and rejects once onFile has settled; only the first failure counts. */
  readonly fail = (err: unknown): void => {
    if (this.failed) return;
    this.failed = true;
    this.req.unpipe(this.parser);
    this.parser.destroy();
    this.fileStream?.destroy(err as Error);
    const settled = this.handling ?? Promise.resolve();
    settled.then(() => this.reject(err), () => this.reject(err));
  };

  /** A file part: the first one named `file` goes to onFile; any other fails the body. */
  readonly filePart = (name: string, stream: Readable, info: busboy.FileInfo): void => {
    // Errors of a part's stream reach us through onFile or the parser; a
    // part nobody reads must still not crash the process when destroyed.
    stream.on('error', ignore);
    if (this.failed) return void stream.resume();
    if (name !== FILE_FIELD) {
      stream.resume();
      return this.fail(badRequest('unexpected_file_part', `Only one file part, named "${FILE_FIELD}", is accepted`));
    }
    if (this.handling) {
      stream.resume();
      return this.fail(badRequest('multiple_files', `Exactly one file part named "${FILE_FIELD}" is accepted`));
    }
    this.fileStream = stream;
    // Called in a promise, so an option refused at once (thrown) fails the body like any later failure.
    this.handling = Promise.resolve().then(() => this.onFile(info.filename ?? '', stream, this.fields));
    this.handling.catch(this.fail);
  };

  /** A plain field: kept for onFile when it comes before the file part; refused after it, or when it takes the file's name. */
  readonly field = (name: string, value: string, info: busboy.FieldInfo): void => {
    if (name === FILE_FIELD) return this.fail(badRequest('missing_file', `The part "${FILE_FIELD}" must be a file, with a filename`));
    if (this.handling) return this.fail(badRequest('field_after_file', `The field "${name}" came after the file part; send fields before it`));
    const kept = info.valueTruncated ? TRUNCATED : value;
    const before = this.fields.get(name);
    this.fields.set(name, before === undefined ? kept : ([] as unknown[]).concat(before, kept) as string[]);
  };

  /** The parser read the whole body: resolves once onFile has, if the client can still get the answer. */
  readonly parsed = (): void => {
    if (this.failed) return;
    if (!this.handling) return this.fail(badRequest('missing_file', `A file part named "${FILE_FIELD}" is required`));
    // A connection already closed cannot carry our answer: the client hung
    // up after its last byte, or sent bytes after the body that Node
    // answered with its own 400 before closing. Either way the client will
    // never see a 201, so the upload must not be kept.
    this.handling.then(() => (this.req.socket.destroyed ? this.fail(clientGone()) : this.resolve()), this.fail);
  };
}
