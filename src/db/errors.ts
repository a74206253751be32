import { Prisma } from '../generated/prisma/client.js';

/** Prisma codes for a database that cannot be reached or dropped the connection. */
const UNREACHABLE_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
/** Driver adapter error kinds that mean the same. */
const UNREACHABLE_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
/** What node-postgres says when a pooled connection dies under a query, or the server shuts down. */
const DRIVER_MESSAGES = /Connection terminated|ECONNREFUSED|ECONNRESET|terminating connection due to administrator command|the database system is (starting up|shutting down)/;

/**
 * Whether `err` means "the database is not there right now" rather than a
 * bug or bad data: such failures are answered 503 with Retry-After, and the
 * pool reconnects on its own once the database is back.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof Prisma.PrismaClientInitializationError) return true;
  if (err instanceof Prisma.PrismaClientKnownRequestError) {
    if (UNREACHABLE_CODES.has(err.code)) return true;
    const kind = (err.meta?.driverAdapterError as { cause?: { kind?: string } } | undefined)?.cause?.kind;
    return kind !== undefined && UNREACHABLE_KINDS.has(kind);
  }
  return err instanceof Error && DRIVER_MESSAGES.test(err.message);
}
