// Memory back after load. Under load V8 grows its heap (old space fills with
// what requests promoted, freed socket and part buffers wait for a
// collection that only allocation triggers), and a server that then goes
// quiet allocates nothing, so nothing collects it: the soak in
// bench/scenarios/soak.ts measured the process resting at its peak. One full
// collection once requests stop gives the heap's pages and the freed
// buffers back to the system, and malloc_trim then what glibc kept of them
// (src/memory/malloc-trim.ts).
import type { Server } from 'node:http';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { mallocTrim } from './malloc-trim.js';
import { countRequests } from './request-count.js';

/** V8's gc(): Node's own, when started with --expose-gc; otherwise exposed for a moment (as Node's docs for setFlagsFromString show). */
type Collect = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

function findCollector(): Collect {
  const own = (globalThis as { gc?: Collect }).gc;
  if (typeof own === 'function') return own;
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as Collect;
  setFlagsFromString('--no-expose-gc');
  return gc;
}

/** What V8 holds: its heap and the memory of buffers it tracks. */
function held(): number {
  const heap = getHeapStatistics();
  return heap.total_heap_size + heap.external_memory;
}

/**
 * The process's resident memory, or undefined when it cannot be read: libuv
 * opens /proc/self/stat to read it, and with every descriptor taken that
 * throws EMFILE. Uncaught in this timer, it ended the server (issue 38: 750
 * idle connections under `ulimit -n 400`).
 */
function residentSet(): number | undefined {
  try {
    return process.memoryUsage.rss();
  } catch {
    return undefined;
  }
}

export interface IdleCollectOptions {
  /** A period without a new request after which the collection runs. */
  quietMs: number;
  /**
   * Growth since the last collection (or start), of V8's memory or of the
   * process's resident memory, below which there is nothing worth collecting.
   */
  minGrowthBytes: number;
  /** Told what a collection gave back, of V8's memory and of resident memory (the server logs it at debug level). */
  onCollect?: (report: { freed_mib: number; rss_freed_mib: number; took_ms: number }) => void;
  /** Paths whose requests are not load (health probes every few seconds would otherwise keep a collection from ever running). */
  ignorePaths?: readonly string[];
  /**
   * Also collect once at the first quiet period, whatever the growth: what
   * starting left behind (modules' loading, the first queries) is garbage
   * too, and would otherwise stay until a burst grew memory past it
   * (docs/performance.md, Memory).
   */
  settleStart?: boolean;
}

/**
 * Collects once when `servers` have had no new request for quietMs after a
 * burst that grew V8's memory or the resident set by minGrowthBytes (growth
 * in glibc's heaps alone, such as the optimizing compiler's, shows only in
 * the second); a health check every few seconds (ignorePaths) neither counts
 * as a request nor keeps one from running.
 * Returns the function that stops it.
 */
export function collectWhenIdle(servers: Server[], options: IdleCollectOptions): () => void {
  const gc = findCollector();
  const requests = countRequests(servers, options.ignorePaths);
  let seen = 0;
  // The first quiet period collects when settling the start: nothing counts as grown past -Infinity.
  let baseline = options.settleStart ? -Infinity : held();
  let rssBaseline = options.settleStart ? -Infinity : (residentSet() ?? -Infinity);
  const timer = setInterval(() => {
    if (requests.total !== seen) {
      seen = requests.total;
      return;
    }
    const before = held();
    const rssBefore = residentSet();
    // Unreadable at the descriptor limit: look again at the next quiet period.
    if (rssBefore === undefined) return;
    if (before - baseline < options.minGrowthBytes && rssBefore - rssBaseline < options.minGrowthBytes) {
      // Growth counts from the least the process rested at: memory given
      // back after the baseline was taken, by V8 itself or by connections
      // closing (without settleStart, the start's own garbage), would
      // otherwise hide as much growth.
      baseline = Math.min(baseline, before);
      rssBaseline = Math.min(rssBaseline, rssBefore);
      return;
    }
    const started = performance.now();
    // 'last-resort' is V8's collection under memory pressure: it also unmaps
    // the free pages V8 keeps pooled for reuse, which a regular one leaves.
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    mallocTrim()?.();
    baseline = held();
    rssBaseline = residentSet() ?? rssBefore;
    const freed = (from: number, to: number) => Math.round((from - to) / 1048576);
    options.onCollect?.({ freed_mib: freed(before, baseline), rss_freed_mib: freed(rssBefore, rssBaseline), took_ms: Math.round(performance.now() - started) });
  }, options.quietMs).unref();
  return () => {
    clearInterval(timer);
    requests.stop();
  };
}
