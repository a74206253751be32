// An HTTP proxy in front of an S3 endpoint that can make chosen requests
// fail as if the store were unreachable (the connection is cut before any
// answer), while every other request goes through untouched. Headers are
// forwarded as sent, Host included, so SigV4 signatures stay valid.
import { once } from 'node:events';
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface S3Proxy {
  endpoint: string;
  /** Cuts every request for which `match` is true (until cleared with `undefined`). */
  cut(match: ((req: IncomingMessage) => boolean) | undefined): void;
  /** Requests cut so far. */
  readonly cutCount: number;
  /**
   * Answers every request for which `match` is true with `status` and an S3
   * error (SlowDown for a 503), never forwarded (until cleared with
   * `undefined`); a browser's gets the CORS headers a store sends with it.
   */
  fail(match: ((req: IncomingMessage) => boolean) | undefined, status?: number): void;
  /** Requests answered by fail() so far. */
  readonly failCount: number;
  /** Every request received so far (cut, held, failed or forwarded), in order, with its Origin header, the body bytes it carried and the store's status: who sent the store what. */
  readonly received: readonly ReceivedRequest[];
  /** Holds the answer of every request for which `match` is true for `ms` before passing it on (until cleared with `undefined`). */
  delay(match: ((req: IncomingMessage) => boolean) | undefined, ms?: number): void;
  /** Answers delayed so far. */
  readonly delayedCount: number;
  /**
   * Takes in every request for which `match` is true (until cleared with
   * `undefined`), body and all, and neither forwards nor answers it: a store
   * that hangs with the request queued. release() or drop() ends each.
   */
  hold(match: ((req: IncomingMessage) => boolean) | undefined): void;
  /** Requests held now (their bodies read in full). */
  readonly held: number;
  /** Forwards every held request, as the store would run what it had queued, and resolves with their statuses (the client is long gone). */
  release(): Promise<number[]>;
  /** Cuts every held request: never forwarded. */
  drop(): void;
  close(): Promise<void>;
}

export interface ReceivedRequest {
  method: string;
  url: string;
  /** A browser's page origin; none from a program such as the service's SDK. */
  origin: string | undefined;
  /** Body bytes received so far. */
  bytes: number;
  /** The store's status, once it answered (not for cut or held requests). */
  status?: number;
}

/** What the predicates below read of a request: an IncomingMessage, or an entry of `received`. */
type RequestLine = Pick<IncomingMessage, 'method' | 'url'>;

/** DELETE /bucket/key?uploadId=...: AbortMultipartUpload. */
export const isAbortMultipartUpload = (req: RequestLine) => req.method === 'DELETE' && /[?&]uploadId=/.test(req.url ?? '');
/** POST /bucket/key?uploadId=...: CompleteMultipartUpload. */
export const isCompleteMultipartUpload = (req: RequestLine) => req.method === 'POST' && /[?&]uploadId=/.test(req.url ?? '');
/** PUT /bucket/key?partNumber=...: UploadPart. */
export const isUploadPart = (req: RequestLine) => req.method === 'PUT' && /[?&]partNumber=/.test(req.url ?? '');
/** PUT /bucket/key: PutObject (a whole small object). */
export const isPutObject = (req: RequestLine) => req.method === 'PUT' && !/[?&](partNumber|uploadId)=/.test(req.url ?? '') && /^\/[^/?]+\/[^?]+/.test(req.url ?? '');
/** DELETE /bucket/key: DeleteObject. */
export const isDeleteObject = (req: RequestLine) => req.method === 'DELETE' && !/[?&]uploadId=/.test(req.url ?? '') && /^\/[^/?]+\/[^?]+/.test(req.url ?? '');

interface Held {
  req: IncomingMessage;
  headers: Record<string, string | string[] | undefined>;
  /** The whole body; undefined when the client went away before sending it all (nothing to forward then). */
  body: Promise<Buffer | undefined>;
}

export async function startS3Proxy(target: string): Promise<S3Proxy> {
  const upstream = new URL(target);
  let match: ((req: IncomingMessage) => boolean) | undefined;
  let cutCount = 0;
  let delayed: { match: (req: IncomingMessage) => boolean; ms: number } | undefined;
  let delayedCount = 0;
  let holding: ((req: IncomingMessage) => boolean) | undefined;
  const held: Held[] = [];
  const received: ReceivedRequest[] = [];
  const forwardHeld = ({ req, headers, body }: Held) =>
    body.then((bytes) =>
      bytes === undefined
        ? 0
        : new Promise<number>((resolve) => {
          const forward = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer) => {
            answer.resume();
            answer.on('end', () => resolve(answer.statusCode ?? 0));
            answer.on('error', () => resolve(0));
          });
          forward.on('error', () => resolve(0));
          forward.end(bytes);
        }),
    );
  let failing: { match: (req: IncomingMessage) => boolean; status: number } | undefined;
  let failCount = 0;
  const server = createServer((req, res) => {
    const entry: ReceivedRequest = { method: req.method ?? '', url: req.url ?? '', origin: req.headers.origin, bytes: 0 };
    received.push(entry);
    req.on('data', (chunk: Buffer) => (entry.bytes += chunk.length));
    if (match?.(req)) {
      cutCount += 1;
      req.socket.destroy();
      return;
    }
    if (failing?.match(req)) {
      failCount += 1;
      const { status } = failing;
      const code = status === 503 ? 'SlowDown' : 'InternalError';
      const cors: Record<string, string> = req.headers.origin ? { 'Access-Control-Allow-Origin': req.headers.origin, Vary: 'Origin' } : {};
      req.resume();
      req.on('end', () => res.writeHead(status, { 'Content-Type': 'application/xml', ...cors }).end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>Please reduce your request rate.</Message></Error>`));
      return;
    }
    // Expect: 100-continue is not signed; Node's client would wait for the 100 itself.
    const { expect: _expect, ...headers } = req.headers;
    if (holding?.(req)) {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('error', () => {});
      const body = new Promise<Buffer | undefined>((resolve) => {
        req.on('end', () => resolve(Buffer.concat(chunks)));
        req.on('close', () => resolve(req.complete ? Buffer.concat(chunks) : undefined));
      });
      held.push({ req, headers, body });
      return;
    }
    const holdMs = delayed?.match(req) ? delayed.ms : 0;
    if (holdMs) delayedCount += 1;
    const forward = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer) => {
      entry.status = answer.statusCode;
      answer.on('error', () => res.destroy());
      setTimeout(() => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      }, holdMs);
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
    req.on('error', () => forward.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cut(next) {
      match = next;
    },
    get cutCount() {
      return cutCount;
    },
    fail(match, status = 503) {
      failing = match && { match, status };
    },
    get failCount() {
      return failCount;
    },
    received,
    delay(match, ms = 0) {
      delayed = match && { match, ms };
    },
    get delayedCount() {
      return delayedCount;
    },
    hold(next) {
      holding = next;
    },
    get held() {
      return held.length;
    },
    async release() {
      return Promise.all(held.splice(0).map(forwardHeld));
    },
    drop() {
      for (const { req } of held.splice(0)) req.socket.destroy();
    },
    async close() {
      for (const { req } of held.splice(0)) req.socket.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
