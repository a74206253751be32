// Issue 42's local-store rows without the rest of `npm run bench`: our
// server on the local store against the busboy-to-file party (plain
// uploads), and tus (one PATCH, 64 MiB PATCHes) against the plain upload
// into the same server, all four alternating in one run. Prints each
// sample with the load average, then medians and ratios; writes no results file.
//   npx tsx bench/local-store.ts [--sizes 256] [--reps 3] [--parties plain,busboy] [--profile] [--strace]
//       [--before bench/data/before]   (a saved build, as for bench/compare-builds.ts)
// --profile runs our server under `node --cpu-prof` (profiles in bench/data/profiles/local-store).
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { ratio, side, startOurs, type Bench } from './lib/context.js';
import { createDatabase, migrate, startDropstream } from './lib/dropstream.js';
import { alternate, setQuietWait } from './lib/measure.js';
import { MiB, setLogDir } from './lib/proc.js';
import { startBusboyFile } from './lib/servers.js';
import { busboyFileParty, dropstreamParty, type UploadSample } from './lib/uploads.js';
import { tusParty } from './scenarios/resumable.js';

const exec = promisify(execFile);
const { values } = parseArgs({ options: { sizes: { type: 'string', default: '256' }, reps: { type: 'string', default: '3' }, profile: { type: 'boolean', default: false }, parties: { type: 'string' }, strace: { type: 'boolean', default: false }, before: { type: 'string' } } });
const loadavg = async () => (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
const DATA = join('bench', 'data');

/** --strace: counts the system calls of `pid` (all threads) until the returned function is called; a summary in `out`. */
async function straceCount(pid: number, out: string): Promise<() => Promise<void>> {
  const child = spawn('strace', ['-f', '-c', '-S', 'calls', '-p', String(pid), '-o', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  // strace reports each thread it attached to: begin once it has attached.
  await new Promise<void>((resolve) => {
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
      if (err.includes('attached')) resolve();
    });
    child.once('exit', () => resolve());
  });
  return async () => {
    child.kill('SIGINT');
    await once(child, 'exit');
  };
}
const workDir = join(DATA, 'work-local-store');
await exec('npm', ['run', 'build'], { maxBuffer: 16 * MiB });
await exec(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.json'], { maxBuffer: 16 * MiB });
await rm(workDir, { recursive: true, force: true });
await mkdir(join(DATA, 'logs'), { recursive: true });
setLogDir(join(DATA, 'logs'));
setQuietWait(3);
const db = await createDatabase();
try {
  await migrate(db.url);
  const profileDir = join(DATA, 'profiles', 'local-store');
  if (values.profile) await rm(profileDir, { recursive: true, force: true });
  const b = {
    quick: true,
    workDir,
    db,
    redisKeyPrefix: `dropstream-bench-${process.pid}`,
    serverFlags: () => (values.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []),
    serverEnv: {},
  } as unknown as Bench;
  const ours = await startOurs(b, 'local-store', 'local');
  const busboy = await startBusboyFile(join(workDir, 'busboy-file'));
  // --before DIR: a saved build (bin, dist, prisma, package.json; as bench/compare-builds.ts) as one more party.
  const before = values.before
    ? await startDropstream({ name: 'dropstream-before', databaseUrl: db.url, dataDir: join(workDir, 'before'), redisKeyPrefix: `${b.redisKeyPrefix}-before`, entry: join(values.before, 'bin', 'dropstream.js') })
    : undefined;
  const parties = [
    dropstreamParty('plain', ours),
    busboyFileParty('busboy', busboy),
    tusParty('tus one PATCH', ours, Number.MAX_SAFE_INTEGER),
    tusParty('tus 64 MiB PATCHes', ours, 64 * MiB),
    ...(before ? [dropstreamParty('plain before', before), tusParty('tus one PATCH before', before, Number.MAX_SAFE_INTEGER)] : []),
  ].filter((p) => !values.parties || values.parties.split(',').includes(p.label));
  try {
    for (const p of parties) await p.upload(8 * MiB, 1); // warm-up
    for (const size of values.sizes!.split(',').map((m) => Number(m) * MiB)) {
      const results = await alternate(parties.map((p) => p.label), Number(values.reps), async (label, rep) => {
        const pid = label === 'busboy' ? busboy.proc.pid : label.endsWith('before') ? before!.proc.pid : ours.proc.pid;
        const tracer = values.strace ? await straceCount(pid, join(DATA, `strace-${label.replaceAll(' ', '-')}-${rep}.txt`)) : undefined;
        const s = (await parties.find((p) => p.label === label)!.upload(size, 1)) as UploadSample;
        await tracer?.();
        console.log(`${size / MiB} MiB #${rep + 1} ${label}: ${s.mb_s} MB/s, cpu ${s.party_cpu_pct}%, load ${await loadavg()}`);
        return s as unknown as Record<string, number>;
      });
      const m = Object.fromEntries(parties.map((p) => [p.label, side(p.label, results[p.label]!).median.mb_s!]));
      console.log(`${size / MiB} MiB medians: ${JSON.stringify(m)}`);
      if (values.profile) console.log(`profiles in ${profileDir}`);
      if (before) console.log(`  plain / plain before ${ratio(m.plain!, m['plain before']!)}; plain before / busboy ${ratio(m['plain before']!, m.busboy!)}; tus one PATCH / before ${ratio(m['tus one PATCH']!, m['tus one PATCH before']!)}`);
      console.log(`  plain / busboy ${ratio(m.plain!, m.busboy!)}; tus one PATCH / plain ${ratio(m['tus one PATCH']!, m.plain!)}; tus 64 MiB / plain ${ratio(m['tus 64 MiB PATCHes']!, m.plain!)}; load ${await loadavg()}`);
    }
  } finally {
    await Promise.all([ours.proc.stop(), busboy.proc.stop(), before?.proc.stop()]);
  }
} finally {
  await db.drop();
  await rm(workDir, { recursive: true, force: true });
}
