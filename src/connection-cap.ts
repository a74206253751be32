import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { clientKey } from './client-key.js';
import { atMostEvery } from './log-throttle.js';
import { awaitingClientBody, capConnectionsPerAddress, responding } from './listener.js';
import type { Metrics } from './metrics.js';
import { defaultMaxConnections, openFilesLimit } from './open-files.js';

export interface ConnectionLimits {
  /** MAX_CONNECTIONS: unset, from the open-files limit; 0, no cap. */
  maxConnections?: number;
  /** MAX_CONNECTIONS_PER_ADDRESS; 0, no cap. */
  maxConnectionsPerAddress: number;
  /** CLIENT_IPV6_PREFIX: the per-address cap counts an IPv6 network of this many bits as one address. */
  clientIpv6Prefix: number;
}

/**
 * Both caps on the public listener, with their metrics and log lines; the
 * per-address one runs first, so a connection it closes costs the global
 * cap nothing (no idle connection is closed to make room for it).
 * Returns the global cap in force.
 */
export function limitConnections(server: Server, limits: ConnectionLimits, logger: Logger, metrics: Metrics): number {
  let max = limits.maxConnections;
  if (max === undefined) {
    const limit = openFilesLimit();
    max = defaultMaxConnections(limit);
    const fields = { maxConnections: max, openFilesLimit: limit.soft };
    if (limit.source === 'assumed') logger.warn(fields, 'MAX_CONNECTIONS is unset and the open-files limit cannot be read here: capped as if `ulimit -n` were 1024; set MAX_CONNECTIONS');
    else logger.info(fields, 'MAX_CONNECTIONS is unset: capped from the open-files limit');
  }
  // Prepended listeners run last-added first: the global cap is added first.
  capConnections(server, max, {
    onShed: (reason) => metrics.connectionsShed.inc({ reason }),
    onFull: () => logger.warn({ maxConnections: max }, 'connections at MAX_CONNECTIONS: closing the oldest idle ones, or refusing new ones'),
    onEased: (shed) => logger.info({ maxConnections: max, ...shed }, 'connections back under MAX_CONNECTIONS'),
    onCount: (open) => metrics.connectionsOpen.set(open),
  });
  capConnectionsPerAddress(server, limits.maxConnectionsPerAddress, () => metrics.connectionsRefused.inc(), (address) => clientKey(address, limits.clientIpv6Prefix));
  return max;
}

export type ShedReason = 'idle_closed' | 'body_waiting_closed' | 'new_refused';

export interface ConnectionCapEvents {
  /** A connection was closed to stay within the cap: the oldest idle one (or one waiting on its client's body) for a new one, or the new one when none was. */
  onShed(reason: ShedReason): void;
  /** The cap was reached after a time below it: once per episode (the server warns). */
  onFull(): void;
  /** Open connections fell back below nine tenths of the cap: the episode is over, with what it shed. */
  onEased(shed: Record<ShedReason, number>): void;
  /** The number of open connections changed. */
  onCount?(open: number): void;
}

/**
 * Holds the listener's open connections at `max`, so that the process never
 * reaches its descriptor limit (issue 38: 750 silent connections from 3
 * addresses, each under the per-address cap, took every descriptor under
 * `ulimit -n 400`, and the next call that needed one ended the process).
 * At the cap a new connection closes the oldest idle one (no request in
 * progress: a silent connection, or a keep-alive one between requests,
 * which HTTP clients retry on a fresh connection) and takes its place; when
 * every one has a request in progress, the new one is closed as it comes.
 * A request whose client still owes the JSON body we are reading counts as
 * idle (issue 50: 97 of them, a byte every 10 s each, held every connection
 * of an instance, as a request in progress). Requests we are serving are
 * never cut for a newcomer, nor uploads, nor bodies we hold back.
 *
 * Runs before Node's HTTP handling of a connection; one closed by a
 * listener that ran earlier (the per-address cap) is not counted.
 * `max` 0: no cap.
 */
export function capConnections(server: Server, max: number, events: ConnectionCapEvents): void {
  if (max <= 0) return;
  // Insertion order is age: the first idle one found is the oldest.
  const open = new Set<Socket>();
  let shed: Record<ShedReason, number> | undefined;
  const record = (reason: ShedReason) => {
    if (!shed) {
      shed = { idle_closed: 0, body_waiting_closed: 0, new_refused: 0 };
      events.onFull();
    }
    shed[reason] += 1;
    events.onShed(reason);
  };
  server.prependListener('connection', (socket: Socket) => {
    if (socket.destroyed) return;
    if (open.size >= max) {
      const found = oldestSheddable(open);
      if (!found) {
        record('new_refused');
        socket.destroy();
        return;
      }
      open.delete(found.socket);
      found.socket.destroy();
      record(found.reason);
    }
    open.add(socket);
    events.onCount?.(open.size);
    socket.once('close', () => {
      if (!open.delete(socket)) return;
      events.onCount?.(open.size);
      if (shed && open.size < max * 0.9) {
        events.onEased(shed);
        shed = undefined;
      }
    });
  });
}

/** The oldest connection that is idle or waiting on its client's body, with which it is. */
function oldestSheddable(open: Set<Socket>): { socket: Socket; reason: 'idle_closed' | 'body_waiting_closed' } | undefined {
  for (const socket of open) {
    if (!responding(socket)) return { socket, reason: 'idle_closed' };
    if (awaitingClientBody(socket)) return { socket, reason: 'body_waiting_closed' };
  }
  return undefined;
}

/** A failed accept (EMFILE) logged at most once a second: a listener at the descriptor limit fails every connection. */
export function acceptErrorLog(logger: Logger): (err: Error) => void {
  const due = atMostEvery(1000);
  return (err) => {
    if (!due()) return;
    logger.error({ err }, 'accepting a connection failed');
  };
}
