// The head of an HTTP/1.1 response, read from the bytes a store sent, for
// the pooled download path (pooled-read.ts): just what a GET of an object
// needs (status, Content-Length, Content-Range, Transfer-Encoding), nothing
// of HTTP it does not use (no 1xx, no trailers, no chunked bodies: a store
// that sends one is read through the SDK instead).

/** The largest head accepted; S3's are under 1 KiB, a store's error pages a few. */
export const MAX_HEAD_BYTES = 16 * 1024;

export interface ResponseHead {
  status: number;
  /** Header values by lower-case name; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** Bytes the head took, its blank line included: the body starts there. */
  size: number;
}

/** A response this reader does not take (malformed, too large a head); the caller fails or falls back. */
export class ResponseHeadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResponseHeadError';
  }
}

const CRLF2 = Buffer.from('\r\n\r\n');
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/;
const HEADER = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/;

/** The head at the start of `bytes`, or undefined while its blank line has not come; throws ResponseHeadError. */
export function readResponseHead(bytes: Buffer): ResponseHead | undefined {
  const end = bytes.indexOf(CRLF2);
  if (end < 0) {
    if (bytes.length > MAX_HEAD_BYTES) throw new ResponseHeadError(`the response head is over ${MAX_HEAD_BYTES} bytes`);
    return undefined;
  }
  if (end + 4 > MAX_HEAD_BYTES) throw new ResponseHeadError(`the response head is over ${MAX_HEAD_BYTES} bytes`);
  const [statusLine = '', ...lines] = bytes.toString('latin1', 0, end).split('\r\n');
  const status = STATUS_LINE.exec(statusLine);
  if (!status) throw new ResponseHeadError(`not an HTTP/1.1 status line: ${JSON.stringify(statusLine.slice(0, 80))}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const header = HEADER.exec(line);
    if (!header) throw new ResponseHeadError(`a malformed header line: ${JSON.stringify(line.slice(0, 80))}`);
    const name = header[1]!.toLowerCase();
    headers[name] = name in headers ? `${headers[name]}, ${header[2]}` : header[2]!;
  }
  return { status: Number(status[1]), headers, size: end + 4 };
}

/** What the body of `head` is: its length (Content-Length), or `undefined` when it is framed otherwise (chunked, or until the close). */
export function bodyLength(head: ResponseHead): number | undefined {
  if (head.headers['transfer-encoding'] !== undefined) return undefined;
  const value = head.headers['content-length'];
  if (value === undefined || !/^\d{1,15}$/.test(value)) return undefined;
  return Number(value);
}

/** The first byte of the object the body starts at: Content-Range's start for a 206, else 0 (the whole object). */
export function servedStart(head: ResponseHead): number {
  if (head.status !== 206) return 0;
  const range = /^bytes (\d+)-(\d+)\/(?:\d+|\*)$/.exec(head.headers['content-range'] ?? '');
  if (!range) throw new ResponseHeadError(`a 206 without a usable Content-Range: ${JSON.stringify(head.headers['content-range'] ?? null)}`);
  return Number(range[1]);
}

/** The `<Code>` of an S3 error body ("NoSuchKey"), when there is one. */
export function errorCode(body: Buffer): string | undefined {
  return /<Code>([^<]{1,100})<\/Code>/.exec(body.toString('utf8'))?.[1];
}
