import { once } from 'node:events';
import { createServer, STATUS_CODES, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ListenerTimeouts {
  /** Seconds to receive the request headers. */
  headersSeconds: number;
  /** Seconds a connection may stay silent. */
  idleSeconds: number;
}

/**
 * An HTTP server whose timeouts suit a file service. Node's defaults would
 * cut any request after 300 s, a slow 5 GiB upload included, and check for
 * dribbled headers only every 30 s. Instead: a short limit on headers
 * (checked every second), none on the whole request, and an idle limit, so
 * an upload that keeps sending runs as long as it needs while a stalled one
 * is dropped.
 */
export function createListener(handler: RequestListener, { headersSeconds, idleSeconds }: ListenerTimeouts): Server {
  const server = createServer({
    headersTimeout: headersSeconds * 1000,
    requestTimeout: 0,
    connectionsCheckingInterval: 1000,
    keepAliveTimeout: 5000,
  }, handler);
  server.timeout = idleSeconds * 1000;
  server.on('clientError', answerClientError);
  return server;
}

const CLIENT_ERRORS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'The request headers are too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'The request headers took too long'],
};

/**
 * Requests Node cannot parse never reach Koa; Node would answer them with a
 * bare 400 and no body, even over the answer to a complete request still
 * being prepared (junk after it in the same packet). Instead: a complete
 * request keeps its answer, then the connection closes; a request whose own
 * body is broken gets our JSON error shape (its handler sees the connection
 * close and cleans up).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // Node keeps the response being written on the socket; not public API, but stable since Node 0.x.
  const inProgress = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if (inProgress && !inProgress.writableEnded && inProgress.req.complete) {
    inProgress.once('close', () => socket.destroy());
    return;
  }
  if (!socket.writable || err.code === 'ECONNRESET' || inProgress?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, code, message] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'bad_request', 'The request could not be parsed'];
  const body = JSON.stringify({ success: false, error: { code, message } });
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export async function listen(server: Server, port: number, host: string): Promise<string> {
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${shownHost}:${address.port}`;
}

const openConnections = (server: Server) =>
  new Promise<number>((resolve) => server.getConnections((err, count) => resolve(err ? 0 : count)));

/**
 * Stops accepting connections and lets requests in progress finish for up to
 * `timeoutMs`; then cuts the connections still open. Idle keep-alive
 * connections are closed as soon as they are idle. Returns how many
 * connections had to be cut.
 */
export async function drain(server: Server, timeoutMs: number): Promise<number> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    server.closeIdleConnections();
    if ((await openConnections(server)) === 0 || Date.now() >= deadline) break;
    await sleep(50);
  }
  const cut = await openConnections(server);
  server.closeAllConnections();
  await closed;
  return cut;
}
