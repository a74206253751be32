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
  /** Every request received so far (cut, held or forwarded), in order: what clients sent the store. */
  readonly received: readonly { method: string; url: string }[];
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

/** DELETE /bucket/key?uploadId=...: AbortMultipartUpload. */
export const isAbortMultipartUpload = (req: IncomingMessage) => req.method === 'DELETE' && /[?&]uploadId=/.test(req.url ?? '');
/** POST /bucket/key?uploadId=...: CompleteMultipartUpload. */
export const isCompleteMultipartUpload = (req: IncomingMessage) => req.method === 'POST' && /[?&]uploadId=/.test(req.url ?? '');
/** PUT /bucket/key?partNumber=...: UploadPart. */
export const isUploadPart = (req: IncomingMessage) => req.method === 'PUT' && /[?&]partNumber=/.test(req.url ?? '');
/** PUT /bucket/key: PutObject (a whole small object). */
export const isPutObject = (req: IncomingMessage) => req.method === 'PUT' && !/[?&](partNumber|uploadId)=/.test(req.url ?? '') && /^\/[^/?]+\/[^?]+/.test(req.url ?? '');
/** DELETE /bucket/key: DeleteObject. */
export const isDeleteObject = (req: IncomingMessage) => req.method === 'DELETE' && !/[?&]uploadId=/.test(req.url ?? '') && /^\/[^/?]+\/[^?]+/.test(req.url ?? '');

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
  const received: { method: string; url: string }[] = [];
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
  const server = createServer((req, res) => {
    received.push({ method: req.method ?? '', url: req.url ?? '' });
    if (match?.(req)) {
      cutCount += 1;
      req.socket.destroy();
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
