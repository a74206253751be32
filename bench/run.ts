// `npm run bench [-- --quick] [--only uploads,direct,resumable,concurrency,downloads,metadata,knobs]
//                [--reps N] [--sizes 64,1024] [--parties dropstream,direct]
//                [--profile] [--out DIR]`
//
// Builds the service and the benchmark's child scripts, starts s3rver and a
// PostgreSQL database of its own, runs the scenarios (bench/scenarios), and
// writes bench/results.json and bench/RESULTS.md. Every party runs in its own
// process; see bench/lib/proc.ts for how memory and CPU are read.
//
// --profile starts our server with `node --cpu-prof` and writes the
// profiles and a summary of their hottest functions to bench/data/profiles
// instead of the results files (the profiler slows the server down).
import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { Bench, Comparison } from './lib/context.js';
import { createDatabase, migrate, REDIS_URL } from './lib/dropstream.js';
import { setQuietWait } from './lib/measure.js';
import { MiB, setLogDir, type Proc } from './lib/proc.js';
import { summarizeProfiles } from './lib/profile.js';
import { machineInfo, writeReport } from './lib/report.js';
import { S3Admin } from './lib/s3.js';
import { startS3rver } from './lib/servers.js';
import { concurrency } from './scenarios/concurrency.js';
import { direct } from './scenarios/direct.js';
import { downloads } from './scenarios/downloads.js';
import { knobs } from './scenarios/knobs.js';
import { metadata } from './scenarios/metadata.js';
import { resumable } from './scenarios/resumable.js';
import { soak } from './scenarios/soak.js';
import { uploads } from './scenarios/uploads.js';

const exec = promisify(execFile);
const SCENARIOS = { uploads, direct, resumable, concurrency, downloads, metadata, knobs, soak } as const;
type ScenarioName = keyof typeof SCENARIOS;

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    reps: { type: 'string' },
    sizes: { type: 'string' },
    parties: { type: 'string' },
    profile: { type: 'boolean', default: false },
    out: { type: 'string', default: 'bench' },
  },
});
const only = (values.only?.split(',') ?? Object.keys(SCENARIOS)) as ScenarioName[];
for (const name of only) if (!(name in SCENARIOS)) throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);

const DATA = join('bench', 'data');
const started = new Date();
const t0 = Date.now();
const log = (line: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}`);

log('building (npm run build; tsc -p bench)');
await exec('npm', ['run', 'build'], { maxBuffer: 16 * MiB });
await exec(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.json'], { maxBuffer: 16 * MiB });

const workDir = join(DATA, 'work');
const profileDir = join(DATA, 'profiles');
await rm(workDir, { recursive: true, force: true });
await rm(join(DATA, 'logs'), { recursive: true, force: true });
await mkdir(workDir, { recursive: true });
await mkdir(join(DATA, 'logs'), { recursive: true });
if (values.profile) await rm(profileDir, { recursive: true, force: true });
setLogDir(join(DATA, 'logs'));
setQuietWait(values.quick ? 3 : 10);

const db = await createDatabase();
let s3proc: Proc | undefined;
const redisKeyPrefix = `dropstream-bench-${process.pid}`;
const cleanUp = async () => {
  await s3proc?.stop().catch(() => {});
  await db.drop().catch((err: unknown) => console.error('dropping the benchmark database failed:', err));
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    const keys = await redis.keys(`${redisKeyPrefix}*`);
    if (keys.length) await redis.del(...keys);
  } catch {}
  redis.disconnect();
  await rm(workDir, { recursive: true, force: true });
};
process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));

// The server's part settings, which the direct upload copies; the driver's
// environment may override them like any server setting.
const PASSED = ['S3_PART_SIZE', 'S3_PARTS_IN_FLIGHT', 'UPLOAD_CONCURRENCY', 'STORE_MIN_RATE', 'STORE_CALL_TIMEOUT', 'LOG_LEVEL', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_', 'GLIBC_TUNABLES', 'MALLOC_CONF', 'MIMALLOC_PURGE_DELAY'];
const serverEnv = Object.fromEntries(PASSED.filter((k) => process.env[k]).map((k) => [k, process.env[k]!]));
// BENCH_SERVER_LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2: our server alone runs on another allocator
// (as LD_PRELOAD in the driver's environment would put every party, and the driver, on it).
if (process.env.BENCH_SERVER_LD_PRELOAD) serverEnv.LD_PRELOAD = process.env.BENCH_SERVER_LD_PRELOAD;
const serverNodeOptions = process.env.BENCH_SERVER_NODE_OPTIONS?.split(/\s+/).filter(Boolean) ?? [];

const results: Comparison[] = [];
const failed: string[] = [];
try {
  log(`database ${db.name}: migrating`);
  await migrate(db.url);
  const s3 = await startS3rver();
  s3proc = s3.proc;
  log(`s3rver at ${s3.endpoint} (pid ${s3.proc.pid}), data in ${s3.directory}`);
  const bench: Bench = {
    quick: values.quick!,
    reps: values.reps ? Number(values.reps) : undefined,
    sizes: values.sizes?.split(',').map((m) => Number(m) * MiB),
    parties: values.parties?.split(','),
    workDir,
    db,
    s3: { proc: s3.proc, admin: new S3Admin(s3.endpoint), endpoint: s3.endpoint, s3rverPid: s3.proc.pid },
    redisKeyPrefix,
    serverFlags: (scenario) => [
      ...serverNodeOptions,
      ...(values.profile ? ['--cpu-prof', '--cpu-prof-dir', join(profileDir, scenario)] : []),
    ],
    serverEnv,
    partSize: Number(serverEnv.S3_PART_SIZE ?? 8 * MiB),
    partsInFlight: Number(serverEnv.S3_PARTS_IN_FLIGHT ?? 2),
  };
  for (const name of only) {
    log(`scenario ${name}${values.quick ? ' (quick)' : ''}`);
    // A scenario that fails is named in the report and the exit status; the
    // others' results, which can take half an hour to get, are still written.
    try {
      results.push(...(await SCENARIOS[name](bench, log)));
    } catch (err) {
      log(`scenario ${name} FAILED: ${(err as Error).stack ?? String(err)}`);
      failed.push(`${name}: ${(err as Error).message}`);
    }
  }
  bench.s3.admin.close();
} finally {
  await cleanUp();
}

const meta = {
  mode: values.quick ? 'quick' : 'full',
  date: started.toISOString(),
  duration_s: Math.round((Date.now() - t0) / 1000),
  machine: await machineInfo(),
  command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
  server_env: { ...serverEnv, ...(serverNodeOptions.length ? { NODE_FLAGS: serverNodeOptions.join(' ') } : {}) },
  ...(failed.length ? { failed } : {}),
};
if (values.profile) {
  const summary = await summarizeProfiles(profileDir);
  log(`profiles and ${summary} written (results files left as they were: the profiler slows the server)`);
} else {
  await mkdir(values.out!, { recursive: true });
  const written = await writeReport(meta, results, values.out!);
  log(`wrote ${written.join(' and ')}`);
}
if (failed.length) {
  log(`FAILED: ${failed.join('; ')}`);
  process.exitCode = 1;
}
