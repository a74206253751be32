// Requests as a measure of load, for what the process tunes by it (the idle
// collection, the young generation's growth): a running count of the
// requests `servers` receive, health probes excluded (a probe every few
// seconds is not load).
import type { IncomingMessage, Server } from 'node:http';

export interface RequestCount {
  /** Requests received since counting began. */
  readonly total: number;
  stop(): void;
}

export function countRequests(servers: Server[], ignorePaths: readonly string[] = []): RequestCount {
  let total = 0;
  const ignored = new Set(ignorePaths);
  // Runs for every request: the path without an array or a copy unless there is a query.
  const count = ({ url = '' }: IncomingMessage) => {
    const query = url.indexOf('?');
    if (!ignored.has(query === -1 ? url : url.slice(0, query))) total += 1;
  };
  for (const server of servers) server.on('request', count);
  return {
    get total() {
      return total;
    },
    stop() {
      for (const server of servers) server.off('request', count);
    },
  };
}
