// `npx tsx bench/idle-vs-tus.ts [--reps 5] [--idle 30] [--no-build] [--before DIR]`
//
// Issue 54's idle target side by side: our server on PostgreSQL + S3
// (s3rver) + Redis, as the bench runs it, against tus-node-server
// (@tus/server + @tus/s3-store on the same s3rver). Each rep starts both at
// once (which starts first rotates), sends no request, and reads each one's
// VmRSS `idle` seconds after it printed that it listens; prints the samples,
// the medians and the ratio of medians as one JSON line. The database is
// migrated beforehand by `dropstream migrate`, so every start of ours is a
// restart (no schema engine), as in the bench. --before names a saved build
// (a folder with bin/, dist/, prisma/ and package.json inside the
// repository, so it finds node_modules; see bench/compare-builds.ts) that
// idles beside the two in every rep: a before/after in one session.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';
import { cleanEnv, createDatabase, MALLOC_ENV, migrate, REDIS_URL } from './lib/dropstream.js';
import { median, round } from './lib/measure.js';
import { currentRss, MiB, setLogDir, start, type Proc } from './lib/proc.js';
import { S3Admin } from './lib/s3.js';
import { startS3rver, startTus } from './lib/servers.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    idle: { type: 'string', default: '30' },
    'no-build': { type: 'boolean', default: false },
    before: { type: 'string' },
  },
});
const reps = Number(values.reps);
const idleMs = Number(values.idle) * 1000;
const exec = promisify(execFile);

if (!values['no-build']) {
  await exec('npm', ['run', 'build'], { maxBuffer: 16 * MiB });
  await exec(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.json'], { maxBuffer: 16 * MiB });
}
const work = await mkdtemp(join(tmpdir(), 'dropstream-idle-vs-tus-'));
setLogDir(work);
const db = await createDatabase();
let s3: Proc | undefined;

/** Ours as bench/lib/dropstream.ts starts it, without the benchmark account (no request before the reading). */
async function startOurs(endpoint: string, name: string, build = '.'): Promise<Proc> {
  const dataDir = join(work, `ours-${name}`);
  await mkdir(dataDir, { recursive: true });
  const { proc } = await start({
    name: `dropstream-idle-${name}`,
    args: [join(build, 'bin/dropstream.js'), 'serve'],
    env: {
      ...MALLOC_ENV,
      ...cleanEnv(),
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_KEY_PREFIX: `dropstream-idle-${process.pid}`,
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      PORT: '0',
      ADMIN_PORT: '0',
      ADMIN_TOKEN: 'i'.repeat(32),
      S3_ENDPOINT: endpoint,
      S3_BUCKET: 'dropstream',
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
    },
    ready: (line) => line.msg === 'dropstream listening',
  });
  return proc;
}

/** Starts one party, waits `idleMs` after it listens, reads its VmRSS (MiB) and stops it. */
async function idleOf(startParty: () => Promise<Proc>): Promise<number> {
  const proc = await startParty();
  try {
    await sleep(idleMs);
    return round((await currentRss(proc.pid)) / MiB, 1);
  } finally {
    await proc.stop();
  }
}

try {
  await migrate(db.url);
  const s3rver = await startS3rver();
  s3 = s3rver.proc;
  const admin = new S3Admin(s3rver.endpoint);
  for (const bucket of ['dropstream', 'tus']) await admin.createBucket(bucket);
  admin.close();
  const samples: Record<string, number[]> = { ours: [], tus: [], ...(values.before ? { before: [] } : {}) };
  for (let rep = 0; rep < reps; rep++) {
    const starts: Record<string, () => Promise<Proc>> = {
      ours: () => startOurs(s3rver.endpoint, `${rep}`),
      tus: async () => (await startTus(s3rver.endpoint, 'tus', work)).proc,
      ...(values.before ? { before: () => startOurs(s3rver.endpoint, `before-${rep}`, values.before) } : {}),
    };
    // All idle at once; which one starts first rotates.
    const names = Object.keys(starts);
    const order = names.map((_, i) => names[(i + rep) % names.length]!);
    const read = await Promise.all(order.map((name, i) => sleep(100 * i).then(() => idleOf(starts[name]!))));
    order.forEach((name, i) => samples[name]!.push(read[i]!));
    console.error(`rep ${rep + 1}: ${order.map((name, i) => `${name} ${read[i]} MiB`).join(', ')}`);
  }
  const m = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
  const ratios = {
    'ours / tus': round(m.ours! / m.tus!, 2),
    ...(values.before ? { 'before / tus': round(m.before! / m.tus!, 2), 'ours / before': round(m.ours! / m.before!, 3) } : {}),
  };
  console.log(JSON.stringify({ idle_s: idleMs / 1000, reps, samples, median_mib: m, ratios }));
} finally {
  await s3?.stop();
  await db.drop();
  await rm(work, { recursive: true, force: true });
}
