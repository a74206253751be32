// What every scenario gets from bench/run.ts: the shared s3rver, the
// benchmark database, a working folder, the mode, and how to start our
// server. Scenarios start and stop the other processes they need.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { median, round } from './measure.js';
import { startDropstream, type BenchDatabase, type Dropstream } from './dropstream.js';
import type { Proc } from './proc.js';
import type { S3Context } from './uploads.js';

export interface Bench {
  quick: boolean;
  /** Overrides every scenario's repetitions (--reps). */
  reps?: number;
  /** Overrides the upload sizes, in bytes (--sizes, in MiB). */
  sizes?: number[];
  /** Only the upload parties whose label starts with one of these (--parties); ours always runs. */
  parties?: string[];
  /** Scratch space (objects, part files); removed at the end. */
  workDir: string;
  db: BenchDatabase;
  s3: S3Context & { proc: Proc };
  redisKeyPrefix: string;
  /** Node flags for our server in this scenario (--cpu-prof when profiling). */
  serverFlags(scenario: string): string[];
  /** Environment overrides for our server (S3_PART_SIZE, ... from the driver's environment). */
  serverEnv: Record<string, string>;
  /** Part size and parts in flight our server runs with (the direct upload uses the same). */
  partSize: number;
  partsInFlight: number;
}

let servers = 0;

/** Our server for one scenario, on S3 (bucket `dropstream`) or the local store; `extra` adds settings. */
export async function startOurs(
  b: Bench,
  scenario: string,
  store: 's3' | 'local',
  extra: { env?: Record<string, string>; nodeFlags?: string[]; deferAccount?: boolean } = {},
): Promise<Dropstream & { dataDir: string }> {
  const dataDir = join(b.workDir, `dropstream-${++servers}`);
  await mkdir(dataDir, { recursive: true });
  const started = await startDropstream({
    name: `dropstream-${scenario}-${store}`,
    databaseUrl: b.db.url,
    dataDir,
    redisKeyPrefix: b.redisKeyPrefix,
    s3: store === 's3' ? { endpoint: b.s3.endpoint, bucket: 'dropstream' } : undefined,
    nodeFlags: [...b.serverFlags(`${scenario}-${store}`), ...(extra.nodeFlags ?? [])],
    env: { ...b.serverEnv, ...extra.env },
    deferAccount: extra.deferAccount,
  });
  // The same object, not a copy: account() sets its apiKey.
  return Object.assign(started, { dataDir });
}

/** One side of a comparison: medians and every sample. */
export interface Side {
  label: string;
  median: Record<string, number>;
  samples: Record<string, number>[];
}

export interface Comparison {
  scenario: 'uploads' | 'direct' | 'resumable' | 'resumable-cuts' | 'concurrency' | 'downloads' | 'metadata' | 'roundtrips' | 'knobs' | 'soak';
  /** e.g. "s3, 1024 MiB" */
  case: string;
  reps: number;
  sides: Side[];
  /** Named ratios of medians, e.g. {"MB/s vs direct lib-storage": 0.83}. */
  ratios: Record<string, number>;
  notes?: string[];
  /** Peak RSS right after start, before any request, MiB, by party (uploads: for the idle target). */
  startupRssMib?: Record<string, number>;
  /** RSS after 30 s without a request since start, MiB, by party (uploads: for the idle target). */
  idleRssMib?: Record<string, number>;
}

export function side(label: string, samples: Record<string, number>[]): Side {
  const keys = Object.keys(samples[0] ?? {});
  return { label, samples, median: Object.fromEntries(keys.map((k) => [k, round(median(samples.map((s) => s[k]!)), 2)])) };
}

export const ratio = (a: number, b: number) => round(a / b, 2);
