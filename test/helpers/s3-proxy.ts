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
  close(): Promise<void>;
}

/** DELETE /bucket/key?uploadId=...: AbortMultipartUpload. */
export const isAbortMultipartUpload = (req: IncomingMessage) => req.method === 'DELETE' && /[?&]uploadId=/.test(req.url ?? '');

export async function startS3Proxy(target: string): Promise<S3Proxy> {
  const upstream = new URL(target);
  let match: ((req: IncomingMessage) => boolean) | undefined;
  let cutCount = 0;
  const server = createServer((req, res) => {
    if (match?.(req)) {
      cutCount += 1;
      req.socket.destroy();
      return;
    }
    // Expect: 100-continue is not signed; Node's client would wait for the 100 itself.
    const { expect: _expect, ...headers } = req.headers;
    const forward = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on('error', () => res.destroy());
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
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
