// How many connections the process can hold before it runs out of file
// descriptors. Node has no getrlimit(); on Linux /proc/self/limits shows the
// limit in force (Node itself raises the soft limit to the hard one as it
// starts, so this is read after that).
import { readFileSync } from 'node:fs';

/** The soft limit assumed where /proc/self/limits cannot be read (not Linux): the usual default. */
const ASSUMED_LIMIT = 1024;
/**
 * Descriptors kept for everything but client connections: the database pool,
 * Redis, the admin listener, the log, PGlite's files, the store's sockets.
 */
const RESERVED = 64;

export interface OpenFilesLimit {
  /** The soft limit on open descriptors; Infinity for "unlimited". */
  soft: number;
  /** Where it came from: read from the kernel, or assumed. */
  source: 'proc' | 'assumed';
}

/** The process's limit on open file descriptors (`ulimit -n`). */
export function openFilesLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): OpenFilesLimit {
  let text: string;
  try {
    text = read();
  } catch {
    return { soft: ASSUMED_LIMIT, source: 'assumed' };
  }
  const soft = /^Max open files\s+(\S+)/m.exec(text)?.[1];
  if (soft === 'unlimited') return { soft: Infinity, source: 'proc' };
  const value = Number(soft);
  return Number.isInteger(value) && value > 0 ? { soft: value, source: 'proc' } : { soft: ASSUMED_LIMIT, source: 'assumed' };
}

/**
 * MAX_CONNECTIONS when it is not set: half of what the reserve leaves, since
 * a busy connection can hold a second descriptor (a local store's file, a
 * socket to S3). Under `ulimit -n 400`: 168; at 1024: 480. 0 (no cap) when
 * the limit is unlimited.
 */
export function defaultMaxConnections(limit: OpenFilesLimit): number {
  if (!Number.isFinite(limit.soft)) return 0;
  return Math.max(1, Math.floor((limit.soft - RESERVED) / 2));
}
