import { Prisma } from '../generated/prisma/client.js';

/** Prisma codes for a database that cannot be reached or dropped the connection. */
const UNREACHABLE_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
/** Driver adapter error kinds that mean the same. */
const UNREACHABLE_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
/**
 * SQLSTATEs of a server shutting down, crashed or still starting (a restart;
 * the pool's next connection works), and of a statement cancelled at its
 * deadline (statement_timeout, lock_timeout, an idle transaction ended):
 * a database too busy or too locked to answer in time.
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '57014', '55P03', '25P03']);
/**
 * What node-postgres says when a pooled connection dies under a query, the
 * server shuts down, or a deadline of ours passes (no answer to a query, no
 * connection from the pool or the server in time).
 */
const DRIVER_MESSAGES =
  /Connection terminated|ECONNREFUSED|ECONNRESET|terminating connection due to administrator command|the database system is (starting up|shutting down)|Query read timeout|timeout exceeded when trying to connect/;

/**
 * Whether `err` means "the database is not there right now" rather than a
 * bug or bad data: such failures are answered 503 with Retry-After, and the
 * pool reconnects on its own once the database is back.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof Prisma.PrismaClientInitializationError) return true;
  if (err instanceof Prisma.PrismaClientKnownRequestError) {
    if (UNREACHABLE_CODES.has(err.code)) return true;
    const cause = (err.meta?.driverAdapterError as { cause?: { kind?: string; originalCode?: string } } | undefined)?.cause;
    return (cause?.kind !== undefined && UNREACHABLE_KINDS.has(cause.kind)) || UNAVAILABLE_STATES.has(cause?.originalCode ?? '');
  }
  return err instanceof Error && DRIVER_MESSAGES.test(err.message);
}
