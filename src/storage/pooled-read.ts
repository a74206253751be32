// A download's bytes read from the store into a few reused buffers (issue 54).
//
// The SDK's GetObject reads its socket the usual way: every read is a new
// 64 KiB buffer, memory V8 counts outside its heap, and a GiB of downloads
// starts 44-50 full collections, each marking the whole service heap (5.95
// core-seconds per GB against a bare proxy's 3.64). Here the socket reads
// with `onread` into buffers borrowed from a shelf (at most `buffers` per
// download); each goes back when the client's write of it has flushed (the
// write's callback). With every buffer out in writes, reading stops: a slow
// client pauses the store's socket, and a download holds at most `buffers`
// of them whatever the client's pace.
//
// The request is the SDK's presigned GET (signed locally, s3-presign.ts),
// sent over a fresh connection (`Connection: close`); the response head is
// read by http-head.ts. What it does not take (a chunked or unframed body, a
// malformed head) is refused before a byte is sent on (UnsupportedAnswer),
// and the store reads the object through the SDK instead.
import net from 'node:net';
import tls from 'node:tls';
import { ObjectStoreError, StoreTimeoutError, type ByteRange } from './store-errors.js';
import { bodyLength, errorCode, readResponseHead, ResponseHeadError, servedStart, type ResponseHead } from './http-head.js';
import type { StoreCallObserver } from './store-deadlines.js';

/** Where a download's bytes go: an http.ServerResponse fits. */
export interface PooledSink {
  write(chunk: Buffer, done: (err?: Error | null) => void): unknown;
  end(): unknown;
}

/** The store answered with an error status (its S3 code from the body when it sent one). */
export class StoreAnswerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
  ) {
    super(`the object store answered ${status}${code ? ` ${code}` : ''}`);
    this.name = 'StoreAnswerError';
  }
}

/** An answer this path does not read (chunked, unframed, malformed): read the object another way. */
export class UnsupportedAnswer extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedAnswer';
  }
}

/**
 * Free read buffers shared by all downloads: a download borrows its own
 * (at most PooledReadOptions.buffers) and gives them back when it ends, so
 * short downloads (ranges) allocate nothing either. Keeps at most `keep`.
 */
export class BufferShelf {
  private readonly free: Buffer[] = [];
  constructor(
    readonly size = 64 * 1024,
    private readonly keep = 64,
  ) {}
  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.size);
  }
  give(buffer: Buffer): void {
    if (this.free.length < this.keep) this.free.push(buffer);
  }
  /** Buffers on the shelf now. */
  get available(): number {
    return this.free.length;
  }
}

export interface PooledReadOptions {
  /** A presigned GET URL of the object (http: or https:). */
  url: URL;
  /** The inclusive bytes wanted; absent: the whole object. */
  range?: ByteRange;
  shelf: BufferShelf;
  /** Read buffers one download may hold (in writes not yet flushed, and the one being read into); at least 2. */
  buffers: number;
  /** Milliseconds until the response head must have come (the store's callMs, as GetObject's first byte). */
  headMs: number;
  /** Milliseconds the body may be silent while we want bytes (readIdleMs). */
  idleMs: number;
  observe?: StoreCallObserver;
  /** Certificates to trust for an https: store besides the system's (and NODE_EXTRA_CA_CERTS); for tests. */
  ca?: string | Buffer;
  /** For tests: called whenever reading pauses (true) or resumes (false) for want of a buffer. */
  onPause?: (paused: boolean) => void;
}

const OPERATION = 'get_object';
/** The most of an error answer's body read for its code. */
const ERROR_BODY_BYTES = 64 * 1024;

/** A body chunk waiting to be sent, and the buffer it lives in (undefined: a copy, nothing to give back). */
interface Chunk {
  bytes: Buffer;
  owner: Buffer | undefined;
}

/** Opens the object at `options.url`: resolves once the store's head has come and says the bytes follow. */
export function openPooledRead(options: PooledReadOptions): Promise<PooledRead> {
  return new PooledRead(options).opened;
}

export class PooledRead {
  /** Bytes the body delivers (the range's, or the object's). */
  length = 0;
  /** Bytes handed to the sink so far. */
  passed = 0;
  readonly opened: Promise<PooledRead>;

  private readonly socket: net.Socket;
  /** Free buffers of this download (one more is always the socket's, to read into). */
  private readonly pool: Buffer[] = [];
  private owned = 0;
  private head: Buffer | undefined = Buffer.alloc(0);
  private answer: ResponseHead | undefined;
  private errorBody: Buffer[] = [];
  /** Body bytes the store still has to send, and those at its start to drop (a store that ignored the Range). */
  private storeLeft = 0;
  private skip = 0;
  private pending: Chunk[] = [];
  private sink: PooledSink | undefined;
  private onFail: ((err: Error) => void) | undefined;
  private failure: Error | undefined;
  private paused = false;
  private done = false;
  private resolved = false;
  private readonly headTimer: NodeJS.Timeout;
  private idleTimer: NodeJS.Timeout | undefined;
  private settleOpen!: { resolve: (read: PooledRead) => void; reject: (err: unknown) => void };

  constructor(private readonly options: PooledReadOptions) {
    if (options.buffers < 2) throw new Error('a pooled read needs at least 2 buffers');
    this.opened = new Promise((resolve, reject) => (this.settleOpen = { resolve, reject }));
    const { url, range } = options;
    const secure = url.protocol === 'https:';
    const port = Number(url.port || (secure ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const onread = { buffer: () => this.nextBuffer(), callback: (n: number, buf: Buffer) => this.onRead(n, buf) };
    this.socket = secure
      ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ca: options.ca, onread } as tls.ConnectionOptions)
      : net.connect({ host, port, onread });
    this.socket.setNoDelay(true);
    const request =
      `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
      (range ? `Range: bytes=${range.start}-${range.end}\r\n` : '') +
      'Connection: close\r\nUser-Agent: dropstream\r\n\r\n';
    this.socket.write(request);
    this.socket.on('error', (err) => this.fail(err));
    this.socket.on('end', () => this.onEnd());
    this.socket.on('close', () => this.onEnd());
    this.headTimer = setTimeout(() => this.fail(new StoreTimeoutError(OPERATION, options.headMs)), options.headMs);
  }

  /**
   * Starts sending `length` bytes of the body to `sink` (writing each chunk
   * with a callback, ending it after the last byte); `onFail` hears of a store failure
   * (ObjectStoreError) after which nothing more is written: cut the response.
   */
  sendTo(sink: PooledSink, length: number, onFail: (err: Error) => void): void {
    if (this.sink) throw new Error('a pooled read is sent once');
    this.sink = sink;
    this.onFail = onFail;
    if (this.failure) return onFail(this.failure);
    // The length the response promised (the file's recorded size): bytes
    // past it are dropped, an object that ends before it fails (as exactBody).
    this.length = length;
    for (const chunk of this.pending.splice(0)) {
      const room = this.length - this.passed;
      if (room > 0) this.write({ bytes: chunk.bytes.subarray(0, room), owner: chunk.owner });
      else if (chunk.owner) this.pool.push(chunk.owner);
    }
    this.finishIfComplete();
    this.startIdleTimer();
    this.resumeIfRoom();
  }

  /** Stops reading and closes the store's connection (the client left, or the download was cut); no failure is reported. */
  destroy(): void {
    this.close();
  }

  /** The buffer the socket reads into next: from this download's pool, or a new one from the shelf while it holds fewer than `buffers`. */
  private nextBuffer(): Buffer {
    const free = this.pool.pop();
    if (free) return free;
    this.owned++;
    return this.options.shelf.take();
  }

  /** Buffers this download could still use for reading: its free ones, and those it may yet take from the shelf. */
  private get room(): number {
    return this.pool.length + (this.options.buffers - this.owned);
  }

  private release(buffer: Buffer): void {
    if (this.done) {
      this.options.shelf.give(buffer);
      return;
    }
    this.pool.push(buffer);
    this.resumeIfRoom();
  }

  private onRead(n: number, buf: Buffer): boolean {
    if (this.done) return false;
    this.idleTimer?.refresh();
    if (this.answer === undefined) this.readHead(n, buf);
    else if (this.answer.status >= 300) this.readErrorBody(buf.subarray(0, n), buf);
    else this.take({ bytes: buf.subarray(0, n), owner: buf });
    // The socket asks for its next buffer right after this returns: keep
    // one for it, and stop reading when it would take the last.
    if (this.room <= 1 || (this.sink === undefined && this.answer !== undefined)) {
      this.pause();
      return false;
    }
    return true;
  }

  private readHead(n: number, buf: Buffer): void {
    const first = this.head!.length === 0;
    const bytes = first ? buf.subarray(0, n) : Buffer.concat([this.head!, buf.subarray(0, n)]);
    let head: ResponseHead | undefined;
    try {
      head = readResponseHead(bytes);
    } catch (err) {
      this.pool.push(buf);
      return this.fail(new UnsupportedAnswer((err as ResponseHeadError).message));
    }
    if (!head) {
      this.head = first ? Buffer.from(bytes) : bytes;
      this.pool.push(buf);
      return;
    }
    this.head = undefined;
    this.answer = head;
    // The first read usually holds the head and the body's start: that start
    // is sent from the read buffer itself; after a head over several reads, from the copy.
    const rest = bytes.subarray(head.size);
    const owner = first ? buf : undefined;
    if (!owner) this.pool.push(buf);
    if (head.status >= 300) {
      this.storeLeft = Math.min(bodyLength(head) ?? ERROR_BODY_BYTES, ERROR_BODY_BYTES);
      this.readErrorBody(rest, owner);
      return;
    }
    try {
      this.accept(head);
    } catch (err) {
      if (owner) this.pool.push(owner);
      return this.fail(err as Error);
    }
    clearTimeout(this.headTimer);
    this.options.observe?.(OPERATION, 'ok');
    this.resolved = true;
    this.settleOpen.resolve(this);
    if (rest.length > 0) this.take({ bytes: rest, owner });
    else if (owner) this.pool.push(owner);
    this.finishIfComplete();
  }

  /** Takes a 2xx head: what of the body to skip and to send. */
  private accept(head: ResponseHead): void {
    const size = bodyLength(head);
    if (head.status !== 200 && head.status !== 206) throw new UnsupportedAnswer(`an answer ${head.status} to a GET`);
    if (size === undefined) throw new UnsupportedAnswer('a body without Content-Length (chunked, or until the close)');
    let start: number;
    try {
      start = servedStart(head);
    } catch (err) {
      throw new UnsupportedAnswer((err as Error).message);
    }
    const { range } = this.options;
    this.storeLeft = size;
    if (!range) {
      this.length = size;
      return;
    }
    // A store may answer more than asked (s3rver answers bytes=0-0 with the whole object): the range is cut out here.
    this.length = range.end - range.start + 1;
    this.skip = range.start - start;
    if (this.skip < 0 || start + size < range.end + 1) {
      throw new ObjectStoreError(`the store served bytes ${start}-${start + size - 1} for the range ${range.start}-${range.end}`);
    }
  }

  private readErrorBody(bytes: Buffer, owner: Buffer | undefined): void {
    if (this.errorBody.reduce((sum, b) => sum + b.length, 0) < ERROR_BODY_BYTES) this.errorBody.push(Buffer.from(bytes));
    if (owner) this.pool.push(owner);
    this.storeLeft -= bytes.length;
    if (this.storeLeft <= 0) this.failWithAnswer();
  }

  private failWithAnswer(): void {
    const status = this.answer!.status;
    this.fail(new StoreAnswerError(status, errorCode(Buffer.concat(this.errorBody))));
  }

  /** A body chunk from the store: the part to send goes on (or waits for the sink), the buffer of the rest comes back. */
  private take(chunk: Chunk): void {
    let bytes = chunk.bytes;
    this.storeLeft -= bytes.length;
    if (this.skip > 0) {
      const dropped = Math.min(this.skip, bytes.length);
      this.skip -= dropped;
      bytes = bytes.subarray(dropped);
    }
    const wanted = this.length - this.passed - this.pendingBytes();
    if (bytes.length > wanted) bytes = bytes.subarray(0, Math.max(wanted, 0));
    if (bytes.length === 0) {
      if (chunk.owner) this.pool.push(chunk.owner);
    } else if (this.sink) this.write({ bytes, owner: chunk.owner });
    else this.pending.push({ bytes, owner: chunk.owner });
    if (this.sink) this.finishIfComplete();
  }

  private pendingBytes(): number {
    let sum = 0;
    for (const chunk of this.pending) sum += chunk.bytes.length;
    return sum;
  }

  private write({ bytes, owner }: Chunk): void {
    this.passed += bytes.length;
    this.sink!.write(bytes, () => {
      if (owner) this.release(owner);
    });
  }

  /** All of the body went to the sink: it is ended in the same tick (see exactBody, download-body.ts), the connection closed. */
  private finishIfComplete(): void {
    if (this.done || !this.sink || this.answer === undefined || this.passed < this.length) return;
    this.sink.end();
    this.close();
  }

  private onEnd(): void {
    if (this.done) return;
    if (this.answer && this.answer.status >= 300) return this.failWithAnswer();
    const short = this.answer ? this.length - this.passed - this.pendingBytes() : undefined;
    if (short === 0) return;
    this.fail(new ObjectStoreError(short === undefined ? 'the object store closed the connection before answering' : `the object ended ${short} bytes short`));
  }

  private startIdleTimer(): void {
    if (this.done || this.idleTimer) return;
    this.idleTimer = setTimeout(() => {
      // Silent because we stopped reading (a slow client): not the store's fault.
      if (this.paused) return this.idleTimer!.refresh();
      this.fail(new StoreTimeoutError(OPERATION, this.options.idleMs));
    }, this.options.idleMs);
    this.idleTimer.unref();
  }

  private pause(): void {
    if (this.paused || this.done) return;
    this.paused = true;
    this.socket.pause();
    this.options.onPause?.(true);
  }

  private resumeIfRoom(): void {
    if (!this.paused || this.done || !this.sink || this.room < 1) return;
    this.paused = false;
    this.socket.resume();
    this.options.onPause?.(false);
  }

  private fail(err: Error): void {
    if (this.done) return;
    const timedOut = err instanceof StoreTimeoutError;
    this.options.observe?.(OPERATION, timedOut ? 'timeout' : 'failed');
    const failure = err instanceof ObjectStoreError || err instanceof UnsupportedAnswer || err instanceof StoreAnswerError ? err : new ObjectStoreError('reading from the object store failed', { cause: err });
    this.failure = failure;
    this.close();
    if (!this.resolved) this.settleOpen.reject(failure);
    else if (this.sink) this.onFail!(failure);
  }

  private close(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.headTimer);
    clearTimeout(this.idleTimer);
    this.socket.destroy();
    // Buffers in writes not yet flushed come back through release(), which shelves them now.
    for (const buffer of this.pool.splice(0)) this.options.shelf.give(buffer);
    for (const { owner } of this.pending.splice(0)) if (owner) this.options.shelf.give(owner);
  }
}
