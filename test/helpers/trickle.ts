// A client that reads a download a little now and then, from a raw socket
// (fetch would read as fast as it can): what a slow or stalled client does
// to the download path, to a limited link's budget and to revocation.
import { connect } from 'node:net';

export interface Trickle {
  /** Resolves at the response's first bytes. */
  started: Promise<void>;
  /** The bytes read and when the connection ended (`afterMs` since the request), or undefined for a download still running after `ms`. */
  endedWithin(ms: number): Promise<{ bytes: number; at: number; afterMs: number } | undefined>;
  /** Stops reading and closes the connection. */
  close(): void;
}

/** GETs `url`, taking one chunk every `everyMs` (a chunk is at most 64 KiB: 1 MB/s at 50 ms). */
export function trickle(url: string, everyMs: number): Trickle {
  const { hostname, port, pathname } = new URL(url);
  const socket = connect(Number(port), hostname);
  const begun = Date.now();
  let bytes = 0;
  let endedAt: number | undefined;
  let resolveStarted!: () => void;
  const started = new Promise<void>((resolve) => (resolveStarted = resolve));
  socket.write(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`);
  socket.on('data', (chunk: Buffer) => {
    if (bytes === 0) resolveStarted();
    bytes += chunk.length;
    socket.pause();
  });
  const timer = setInterval(() => socket.resume(), everyMs);
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) =>
    socket.on('close', () => {
      endedAt = Date.now();
      clearInterval(timer);
      resolve();
    }),
  );
  return {
    started,
    endedWithin: async (ms) => {
      let waiting: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((resolve) => (waiting = setTimeout(resolve, ms)))]);
      clearTimeout(waiting);
      return endedAt === undefined ? undefined : { bytes, at: endedAt, afterMs: endedAt - begun };
    },
    close: () => {
      clearInterval(timer);
      socket.destroy();
    },
  };
}
