import { once } from 'node:events';
import { createServer, type RequestListener, type Server } from 'node:http';
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
  return server;
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
