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
  /** Holds the answer of every request for which `match` is true for `ms` before passing it on (until cleared with `undefined`). */
  delay(match: ((req: IncomingMessage) => boolean) | undefined, ms?: number): void;
  /** Answers delayed so far. */
  readonly delayedCount: number;
  close(): Promise<void>;
}

/** DELETE /bucket/key?uploadId=...: AbortMultipartUpload. */
export const isAbortMultipartUpload = (req: IncomingMessage) => req.method === 'DELETE' && /[?&]uploadId=/.test(req.url ?? '');
/** POST /bucket/key?uploadId=...: CompleteMultipartUpload. */
export const isCompleteMultipartUpload = (req: IncomingMessage) => req.method === 'POST' && /[?&]uploadId=/.test(req.url ?? '');
/** PUT /bucket/key?partNumber=...: UploadPart. */
export const isUploadPart = (req: IncomingMessage) => req.method === 'PUT' && /[?&]partNumber=/.test(req.url ?? '');

export async function startS3Proxy(target: string): Promise<S3Proxy> {
  const upstream = new URL(target);
  let match: ((req: IncomingMessage) => boolean) | undefined;
  let cutCount = 0;
  let delayed: { match: (req: IncomingMessage) => boolean; ms: number } | undefined;
  let delayedCount = 0;
  const server = createServer((req, res) => {
    if (match?.(req)) {
      cutCount += 1;
      req.socket.destroy();
      return;
    }
    // Expect: 100-continue is not signed; Node's client would wait for the 100 itself.
    const { expect: _expect, ...headers } = req.headers;
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
    delay(match, ms = 0) {
      delayed = match && { match, ms };
    },
    get delayedCount() {
      return delayedCount;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
