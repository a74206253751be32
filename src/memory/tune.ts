// The memory tuning `dropstream serve` gives its process once it listens:
// one collection when requests stop (idle-collect.ts) and a young generation
// that grows only under a high request rate (young-generation.ts). It is the
// command's, not the composition root's: it changes process-wide V8 flags,
// which a test process or an embedding program must keep as they are.
import type { Server } from 'node:http';
import { collectWhenIdle, type IdleCollectOptions } from './idle-collect.js';
import { growYoungGenerationWithLoad } from './young-generation.js';

/** After a burst, the quiet period before the collection, and the growth worth collecting. */
const QUIET_MS = 10_000;
const MIN_GROWTH_BYTES = 16 * 1024 * 1024;

export interface MemoryTuningOptions {
  /** Paths that are not load: health probes every few seconds would otherwise keep a collection from ever running. */
  ignorePaths: readonly string[];
  onCollect?: IdleCollectOptions['onCollect'];
}

/** Follows the requests `servers` receive; returns the function that stops it (and gives V8 its own growth back). */
export function tuneMemory(servers: Server[], options: MemoryTuningOptions): () => void {
  const stopCollecting = collectWhenIdle(servers, {
    quietMs: QUIET_MS,
    minGrowthBytes: MIN_GROWTH_BYTES,
    settleStart: true,
    ignorePaths: options.ignorePaths,
    onCollect: options.onCollect,
  });
  const stopGrowing = growYoungGenerationWithLoad(servers, { ignorePaths: options.ignorePaths });
  return () => {
    stopCollecting();
    stopGrowing();
  };
}
