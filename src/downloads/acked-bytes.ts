// How many bytes a connection's peer has acknowledged: the kernel counts
// them (TCP_INFO's tcpi_bytes_acked, Linux 4.1 and later), Node does not,
// and koffi (already loaded for malloc_trim, src/memory/malloc-trim.ts) reads it
// with getsockopt. A limited link is charged by it (issue 38): counting what
// was handed to the kernel charged a client that read 64 KiB of a 20 MiB
// file and stopped for 4.19 MB, the kernel's send buffer (tcp_wmem's 4 MiB
// ceiling) and its own receive buffer. Measured here, the same client was
// acknowledged 195,584 bytes: what it read and what its kernel buffered.
//
// Why not bytes written less the send queue (ioctl SIOCOUTQ): a client that
// hangs up sends a reset, which empties the send queue before Node learns of
// it, so the queue then reads 0 and the whole of it looks delivered. The
// acknowledged count survives the reset, and is read just before the socket
// closes (beforeClose, below).
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

const IPPROTO_TCP = 6;
const TCP_INFO = 11;
/** struct tcp_info: tcpi_bytes_acked is the u64 at byte 120 (after tcpi_total_retrans, pacing rates). */
const BYTES_ACKED_OFFSET = 120;

type ReadAcked = (fd: number) => number | undefined;

let loaded: ReadAcked | null | undefined;

/** Reads tcpi_bytes_acked of a descriptor, loaded on first use; null where it cannot be read (not Linux, no koffi binary). */
function readAcked(): ReadAcked | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform !== 'linux') return loaded;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    const getsockopt = koffi
      .load('libc.so.6')
      .func('int getsockopt(int fd, int level, int name, _Out_ uint8_t *value, _Inout_ uint32_t *length)') as (...args: unknown[]) => number;
    const info = Buffer.alloc(256);
    loaded = (fd) => {
      const length = [info.length];
      if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, length) !== 0 || length[0]! < BYTES_ACKED_OFFSET + 8) return undefined;
      return Number(info.readBigUInt64LE(BYTES_ACKED_OFFSET));
    };
  } catch {
    // No glibc or no koffi binary: what was handed on counts as delivered, as before.
  }
  return loaded;
}

/** Whether acknowledged bytes can be read on this system. */
export const canReadAcked = () => readAcked() !== null;

/** Bytes `socket`'s peer has acknowledged since it connected; undefined where that cannot be read (or once it is closed). */
export function bytesAcked(socket: Socket | null | undefined): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } } | null | undefined)?._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return undefined;
  return readAcked()?.(fd);
}

const beforeCloseKey = Symbol('dropstream.beforeClose');
type Hooked = Socket & { [beforeCloseKey]?: (() => void) | null; _destroy(err: Error | null, done: (err?: Error | null) => void): void };

/**
 * Runs `fn` when `socket` is destroyed, before its descriptor closes (a
 * 'close' listener runs after, too late to read it). One hook per socket,
 * set per response on a kept-alive connection; the returned function
 * removes it. Node has no public event for this: the instance's _destroy
 * (net.Socket's, which closes the handle) is wrapped.
 */
export function beforeClose(socket: Socket, fn: () => void): () => void {
  const hooked = socket as Hooked;
  if (!(beforeCloseKey in hooked)) {
    const destroy = hooked._destroy;
    hooked._destroy = function (this: Hooked, err, done) {
      try {
        this[beforeCloseKey]?.();
      } catch {
        // A measurement must never keep a socket open.
      }
      return destroy.call(this, err, done);
    };
  }
  hooked[beforeCloseKey] = fn;
  return () => {
    if (hooked[beforeCloseKey] === fn) hooked[beforeCloseKey] = null;
  };
}
