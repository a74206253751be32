import { once } from 'node:events';
import { createServer, STATUS_CODES, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { statusOf, type ErrorCode } from './error-codes.js';
import { bodyHeldBack } from './http/body-rate.js';
import { clientOwesBody } from './http/json-body.js';
import { markCutByServer } from './http/server-cut.js';

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
  const draining = newDrainState();
  const server = createServer({
    headersTimeout: headersSeconds * 1000,
    requestTimeout: 0,
    connectionsCheckingInterval: 1000,
    keepAliveTimeout: KEEP_ALIVE_MS,
  }, (req, res) => {
    if (draining.started && !answerWhileDraining(req.socket, res, draining)) return;
    handler(req, res);
  });
  drainStates.set(server, draining);
  server.timeout = idleSeconds * 1000;
  // With a listener here Node no longer destroys a connection silent for
  // server.timeout on its own: only the client's silence ends it. While the
  // server is the slow side (a store completing a 5 GiB upload took over
  // a minute, the client waiting for its answer; a slow store holding the
  // body back) the store's own deadlines bound the wait.
  server.on('timeout', (socket: Socket) => {
    // Its keep-alive timer, during a drain: ended, not destroyed, so what
    // its client still reads is delivered (drain() waits for its close). A
    // request stalled half-way is not idle: it goes as outside a drain.
    if (draining.started && !responding(socket) && !readingRequests(server).has(socket)) return void closeIdle(socket, draining);
    if (!waitingOnServer(socket)) return void socket.destroy();
    // Node's timer fires once per silence: set it again to look again.
    socket.setTimeout(server.timeout);
  });
  server.on('clientError', answerClientError);
  trackConnections(server);
  return server;
}

/**
 * The keep-alive timeout the server advertises (`Keep-Alive: timeout=5`);
 * Node closes an idle connection a second after it. Clients that honour the
 * hint (Node's global agent, undici's fetch) drop an idle connection after
 * 4 s, Caddy's transport here after 4 s too (Caddyfile), so none sends on a
 * connection idle long enough for the server to close it.
 */
export const KEEP_ALIVE_MS = 5000;

/** What a listener's drain has begun and counted (drain() sets it going; the request handler and timers read it). */
interface DrainState {
  started: boolean;
  /** Idle keep-alive connections the drain ended (no request of theirs was in progress or being read). */
  idleClosed: number;
  /** Requests that arrived on a connection the drain had already ended: not served, their connection reset. */
  resetRequests: number;
}

const newDrainState = (): DrainState => ({ started: false, idleClosed: 0, resetRequests: 0 });
const drainStates = new WeakMap<Server, DrainState>();

/**
 * A request during a drain is answered, with `Connection: close`: its
 * client then knows not to send another on this connection, and the
 * connection is ended after the answer. Unless it came on a connection the
 * drain had already ended (it crossed our FIN: its client sent it before the
 * FIN arrived): no answer can reach the client any more, so it is not served
 * at all (an upload stored for a client that sees a reset would be stored
 * twice when it retries), and the connection is reset and counted.
 */
function answerWhileDraining(socket: Socket, res: ServerResponse, draining: DrainState): boolean {
  if (socket.writableEnded) {
    draining.resetRequests += 1;
    socket.destroy();
    return false;
  }
  closeAfterThis(socket, res);
  return true;
}

/**
 * Says `Connection: close` on the response (when its headers are not yet
 * sent), and makes the close after it an end: Node's destroySoon() would
 * destroy the socket as soon as the kernel holds the answer, and the
 * drain could not wait for the client to have read it.
 */
function closeAfterThis(socket: Socket, res: ServerResponse): void {
  if (res.headersSent) return;
  res.shouldKeepAlive = false;
  // An answer that closes for reasons of its own (src/http/unread-body.ts) keeps its own way.
  if (Object.hasOwn(socket, 'destroySoon')) return;
  socket.destroySoon = function endOnly(this: Socket) {
    this.setTimeout(0);
    this.end();
  };
}

/** Ends an idle connection during a drain (FIN after what it still has to send): drain() waits for its client to close its side. */
function closeIdle(socket: Socket, draining: DrainState): void {
  if (socket.writableEnded) return;
  // Node's keep-alive timer would destroy the socket a second later while
  // its client may still be reading what the kernel holds; the drain's
  // deadline is the only one.
  socket.setTimeout(0);
  socket.end();
  draining.idleClosed += 1;
}

/**
 * The connections whose next request has begun to arrive (its first bytes
 * read, not yet all of it): Node's own list of connections, as its
 * closeIdleConnections() reads it (not public API; where absent, none).
 */
function readingRequests(server: Server): Set<Socket> {
  const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connections');
  const list = key && (server as unknown as Record<symbol, { active?: () => { socket?: Socket }[] } | undefined>)[key];
  return new Set((list?.active?.() ?? []).flatMap((parser) => (parser.socket ? [parser.socket] : [])));
}

/** A listener's open connections (a request's response is found on its socket at drain time, so requests cost nothing here). */
const connectionsOf = new WeakMap<Server, Set<Socket>>();

function trackConnections(server: Server): void {
  const open = new Set<Socket>();
  connectionsOf.set(server, open);
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
}

/**
 * The response in progress on the connection, if any: Node assigns each
 * request's response to its socket until the response has finished (the same
 * field answerClientError reads; not public API, but stable since Node 0.x).
 */
const responseOn = (socket: Socket) => (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
/** Whether a request is in progress on the connection (its response not yet finished). */
export const responding = (socket: Socket) => Boolean(responseOn(socket));

/**
 * Whether the request in progress on the connection waits on its client for
 * a JSON body we are reading, answered nothing yet (issue 50: such requests
 * held every connection, a byte every 10 s). Closing it costs the client
 * only a request it has not finished sending. Not an upload's body, nor one
 * we hold back: then we are the slow side.
 */
export function awaitingClientBody(socket: Socket): boolean {
  const res = responseOn(socket);
  return Boolean(res && !res.headersSent && clientOwesBody(res.req));
}

/**
 * Whether the connection is silent because of us: a request is in progress,
 * nothing we sent waits for the client to read it, and its body is either
 * all here or held back by us (its buffer full: the handler is not reading).
 */
function waitingOnServer(socket: Socket): boolean {
  const res = responseOn(socket);
  if (!res || res.writableLength > 0) return false;
  const { req } = res;
  return req.complete || bodyHeldBack(req);
}

/**
 * Closes a new connection at once when its address already has `max` open
 * (issue 27: 1,000 silent connections from one address were all accepted and
 * held until HEADERS_TIMEOUT, each costing a socket and a parser). The address
 * is the socket's peer: behind a proxy it is the proxy's for every client, so
 * there the cap is off or above the proxy's own connections. Runs before
 * Node's HTTP handling of the connection, so a refused one costs nothing more.
 * `max` 0: no cap.
 */
export function capConnectionsPerAddress(server: Server, max: number, onRefused: () => void, keyOf: (address: string) => string = (a) => a): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  server.prependListener('connection', (socket: Socket) => {
    if (socket.remoteAddress === undefined) return; // already gone
    // The client the address counts as (an IPv6 /64: src/client-key.ts).
    const address = keyOf(socket.remoteAddress);
    const count = open.get(address) ?? 0;
    if (count >= max) {
      onRefused();
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

const CLIENT_ERRORS: Record<string, [ErrorCode, string]> = {
  HPE_HEADER_OVERFLOW: ['headers_too_large', 'The request headers are too large'],
  ERR_HTTP_REQUEST_TIMEOUT: ['request_timeout', 'The request headers took too long'],
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
  const [code, message] = CLIENT_ERRORS[err.code ?? ''] ?? ['bad_request', 'The request could not be parsed'];
  const status = statusOf(code);
  const body = JSON.stringify({ success: false, error: { code, message } });
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Listens; `onError` then hears the errors a listening server emits, which
 * are failed accepts. At the descriptor limit libuv accepts and closes the
 * waiting connections with a descriptor it keeps in reserve, and emits
 * nothing (seen: 418 of 750 connections closed at once under `ulimit -n
 * 400`); only when it cannot take that reserve back does it report EMFILE,
 * and an 'error' event with no listener would end the process (issue 38).
 */
export async function listen(server: Server, port: number, host: string, onError: (err: Error) => void = () => {}): Promise<string> {
  server.listen(port, host);
  await once(server, 'listening');
  server.on('error', onError);
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${shownHost}:${address.port}`;
}

export interface Drained {
  /** Connections cut at the deadline with a response still being written (or a request still being read). */
  cut: number;
  /** Connections whose responses were all written but whose client had not read them to the end at the deadline. */
  delivering: number;
  /** Idle keep-alive connections ended by the drain: their client had sent no request since its last answer. */
  idleClosed: number;
  /** Requests that crossed the drain's FIN on an idle connection: not served, their connection reset. */
  resetRequests: number;
}

export interface DrainOptions {
  /**
   * How long an idle keep-alive connection is left open for its client's
   * next request (answered with `Connection: close`), from when the drain
   * first finds it idle; Node's keep-alive timer ends it sooner when it
   * runs out. 0: idle connections are ended at once.
   */
  idleWaitMs?: number;
}

/**
 * Stops accepting connections and lets requests in progress finish for up to
 * `timeoutMs`; then cuts the connections still open.
 *
 * Every answer from the drain's start on says `Connection: close` (those
 * whose headers are already out, after them the connection is idle). An
 * idle keep-alive connection is closed only between requests: never while a
 * request of its is being read or answered, and only once it has been idle
 * for `idleWaitMs` (or its keep-alive timeout ran out). Closing it at once
 * reset the requests its client had sent as the FIN was on its way: six
 * keep-alive pollers lost one request each to every SIGTERM (issue 51).
 *
 * A response is delivered when its client has read it, not when its last
 * byte reaches the kernel: megabytes can still sit in the socket's send
 * queue, and a container's network goes with its process (a 100 MiB
 * download through Caddy lost its last 3.2 MB on `docker stop`, issue 21).
 * So each connection is ended (FIN after the queued bytes), never destroyed,
 * and the drain waits for the client to close its side, which it does once
 * it has read everything. http.Server's own close() is not used: it
 * destroys every idle connection at once, queued bytes and all.
 */
export async function drain(server: Server, timeoutMs: number, { idleWaitMs = 0 }: DrainOptions = {}): Promise<Drained> {
  const open = connectionsOf.get(server);
  const draining = drainStates.get(server);
  if (!open || !draining) throw new Error('drain() takes a listener made by createListener()');
  draining.started = true;
  const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
  for (const socket of open) {
    const res = responseOn(socket);
    if (res) closeAfterThis(socket, res);
  }
  const deadline = Date.now() + timeoutMs;
  const idleSince = new Map<Socket, number>();
  let reading = new Set<Socket>();
  for (;;) {
    const now = Date.now();
    reading = readingRequests(server);
    for (const socket of open) {
      if (socket.writableEnded) continue;
      if (responding(socket) || reading.has(socket)) {
        idleSince.delete(socket);
        continue;
      }
      const since = idleSince.get(socket) ?? now;
      idleSince.set(socket, since);
      if (now - since >= idleWaitMs) closeIdle(socket, draining);
    }
    if (open.size === 0 || Date.now() >= deadline) break;
    await sleep(50);
  }
  // At the deadline: what is still being read or answered is cut; an idle
  // connection still waiting for its client's next request is closed as the
  // idle ones were; the rest were ended and are still being read.
  let cut = 0;
  let delivering = 0;
  for (const socket of open) {
    if (responding(socket)) markCutByServer(socket);
    if (responding(socket) || reading.has(socket)) cut += 1;
    else if (!socket.writableEnded) draining.idleClosed += 1;
    else delivering += 1;
    socket.destroy();
  }
  await closed;
  stopConnectionsCheck(server);
  return { cut, delivering, idleClosed: draining.idleClosed, resetRequests: draining.resetRequests };
}

/**
 * http.Server's close() stops the timer that checks headersTimeout every
 * connectionsCheckingInterval; drain() closes the server as a net.Server, so
 * it stops that timer itself. Unstopped, it ran every second for the rest of
 * the process and kept the app and its services reachable (unref'd, so
 * nothing showed). Node keeps the timer under a symbol named as below.
 */
function stopConnectionsCheck(server: Server): void {
  const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connectionsCheckingInterval');
  if (key) clearInterval((server as unknown as Record<symbol, NodeJS.Timeout | undefined>)[key]);
}
