// glibc keeps what free() gives back inside its heaps, and returns a page to
// the system only when it is at the top of one; what V8's optimizing
// compiler frees in pieces after a burst stays. malloc_trim(0) also hands
// back the free pages in the middle of every arena. Node has no binding for
// it; koffi (a maintained FFI with prebuilt binaries, which the server loads
// for TCP_INFO too) calls it. A preloaded jemalloc or mimalloc instead gave
// less back (docs/performance.md, Memory; docs/decisions.md).
import { createRequire } from 'node:module';

/** Gives glibc's free pages back to the system; false when there were none. */
export type Trim = () => boolean;

let loaded: Trim | null | undefined;

/**
 * malloc_trim, loaded on first use (the idle collection's first run, once
 * the server has settled after its start: loading koffi touches a few MiB,
 * which the start's peak need not carry), or null where there is none: not
 * Linux, a C library other than glibc (musl has no malloc_trim), or koffi's
 * binary missing for this platform.
 */
export function mallocTrim(): Trim | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform !== 'linux') return loaded;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    const trim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as (pad: number) => number;
    loaded = () => trim(0) === 1;
  } catch {
    // No glibc or no koffi binary: memory stays with the allocator, as without this module.
  }
  return loaded;
}
