// Scenario 1: one upload at a time of 64 MiB, 1 GiB and 5 GiB.
//   S3:    our service, the direct lib-storage upload (the limit),
//          tus-node-server and Express + multer-s3, all on the same s3rver.
//   local: our service; the fair limit, a bare node:http server piping the
//          same multipart body through busboy into a file with the same
//          fsync policy (bench/procs/busboy-file-server.ts); and a bare Node
//          process piping to a file (no HTTP: the disk's own limit).
// Servers start once; their memory is read right after start (the peak) and
// after IDLE_AFTER_START_S seconds without a request (issue 24's idle after
// start; in full mode the median of that start and IDLE_STARTS more, ours and
// tus-node-server started fresh side by side, since one start of each reads
// within a few MiB); a small upload warms each one up (JIT, connection pools) before
// anything is measured, and VmHWM is reset before every run.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { alternate, median } from '../lib/measure.js';
import { currentRss, MiB } from '../lib/proc.js';
import { startBusboyFile, startMulter, startTus } from '../lib/servers.js';
import { busboyFileParty, directFileParty, directS3Party, dropstreamParty, multerParty, tusParty, type UploadParty, type UploadSample } from '../lib/uploads.js';

const OURS = 'dropstream';
const DIRECT_S3 = 'direct lib-storage';
const TUS = 'tus-node-server';
const MULTER = 'Express + multer-s3';
const DIRECT_FILE = 'bare Node to file';
export const BUSBOY_FILE = 'node:http + busboy to file';
/** As the soak's idle: RSS after this long without a request. */
const IDLE_AFTER_START_S = 30;
/** Fresh starts of ours and tus-node-server, side by side, for the idle reading's median (full mode; issue 54). */
const IDLE_STARTS = 2;

/** RSS by party, for a log line or a note: "dropstream 96.4 MiB, tus-node-server 82.8 MiB". */
const rssList = (rss: Record<string, number>) => Object.entries(rss).map(([k, v]) => `${k} ${(v / MiB).toFixed(1)} MiB`).join(', ');
const rssInMib = (rss: Record<string, number>) => Object.fromEntries(Object.entries(rss).map(([k, v]) => [k, Math.round((v / MiB) * 10) / 10]));

/** Starts ours and tus-node-server together `count` times, each time reading their RSS IDLE_AFTER_START_S after both listen; no request in between. */
async function idleStarts(b: Bench, tusTmp: string, count: number): Promise<{ ours: number[]; tus: number[] }> {
  const read = { ours: [] as number[], tus: [] as number[] };
  for (let i = 0; i < count; i++) {
    const [ours, tus] = await Promise.all([startOurs(b, 'uploads-idle', 's3', { deferAccount: true }), startTus(b.s3.endpoint, 'tus', tusTmp)]);
    try {
      await sleep(IDLE_AFTER_START_S * 1000);
      read.ours.push(await currentRss(ours.proc.pid));
      read.tus.push(await currentRss(tus.proc.pid));
    } finally {
      await Promise.all([ours.proc.stop(), tus.proc.stop()]);
    }
  }
  return read;
}

export function uploadSizes(b: Bench): number[] {
  if (b.sizes) return b.sizes;
  return (b.quick ? [64] : [64, 1024, 5120]).map((m) => m * MiB);
}

function repsFor(b: Bench, size: number): number {
  if (b.reps) return b.reps;
  if (b.quick) return 2;
  return size <= 64 * MiB ? 5 : size <= 1024 * MiB ? 3 : 1;
}

/** startPeak: each server's peak RSS right after start; rested: its RSS IDLE_AFTER_START_S later (empty where not read). */
async function compare(b: Bench, store: string, all: UploadParty[], startPeak: Record<string, number>, rested: Record<string, number>, log: (s: string) => void): Promise<Comparison[]> {
  const parties = all.filter((p, i) => i === 0 || !b.parties || b.parties.some((name) => p.label.startsWith(name)));
  for (const p of parties) await p.upload(8 * MiB, 1); // warm-up, not measured
  const out: Comparison[] = [];
  for (const size of uploadSizes(b)) {
    const reps = repsFor(b, size);
    const results = await alternate(parties.map((p) => p.label), reps, async (label, rep) => {
      const s = await parties.find((p) => p.label === label)!.upload(size, 1);
      log(`  ${store} ${size / MiB} MiB #${rep + 1} ${label}: ${s.mb_s} MB/s, peak RSS ${s.peak_rss_mib} MiB, cpu ${s.party_cpu_pct}%${store === 's3' ? `, s3rver ${s.s3rver_cpu_pct}%` : ''}`);
      return s as unknown as Record<string, number>;
    });
    const sides = parties.map((p) => side(p.label, results[p.label]!));
    const ours = sides[0]!.median as unknown as UploadSample;
    const ratios: Record<string, number> = {};
    for (const other of sides.slice(1)) ratios[`MB/s vs ${other.label}`] = ratio(ours.mb_s, other.median.mb_s!);
    const notes = [`peak RSS right after start, before any request: ${rssList(startPeak)}`];
    if (Object.keys(rested).length) notes.push(`RSS ${IDLE_AFTER_START_S} s after start, no request yet${b.quick ? '' : ` (${OURS} and ${TUS}: the median of ${IDLE_STARTS + 1} starts)`}: ${rssList(rested)}`);
    const first = { notes, startupRssMib: rssInMib(startPeak), idleRssMib: rssInMib(rested) };
    out.push({ scenario: 'uploads', case: `${store}, ${size / MiB} MiB`, reps, sides, ratios, ...(out.length ? {} : first) });
  }
  return out;
}

export async function uploads(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const results: Comparison[] = [];
  const ctx = b.s3;
  for (const bucket of ['direct', 'tus', 'multer']) await ctx.admin.createBucket(bucket);
  const tusTmp = join(b.workDir, 'tus-tmp');
  await mkdir(tusTmp, { recursive: true });

  // The account comes after the idle reading: "no request yet" means none, not even the admin API's.
  const ours = await startOurs(b, 'uploads', 's3', { deferAccount: true });
  const tus = await startTus(ctx.endpoint, 'tus', tusTmp);
  const multer = await startMulter(ctx.endpoint, 'multer');
  try {
    const startPeak = { [OURS]: ours.startupPeakRss, [TUS]: tus.startupPeakRss, [MULTER]: multer.startupPeakRss };
    await sleep(IDLE_AFTER_START_S * 1000);
    const first = { [OURS]: await currentRss(ours.proc.pid), [TUS]: await currentRss(tus.proc.pid), [MULTER]: await currentRss(multer.proc.pid) };
    log(`S3 uploads (peak RSS after start: ${rssList(startPeak)}; ${IDLE_AFTER_START_S} s later: ${rssList(first)})`);
    await ours.account();
    const more = await idleStarts(b, tusTmp, b.quick ? 0 : IDLE_STARTS);
    if (more.ours.length) log(`  idle ${IDLE_AFTER_START_S} s after ${more.ours.length} more starts: dropstream ${more.ours.map((v) => (v / MiB).toFixed(1)).join(', ')} MiB; tus-node-server ${more.tus.map((v) => (v / MiB).toFixed(1)).join(', ')} MiB`);
    const rested = { ...first, [OURS]: median([first[OURS]!, ...more.ours]), [TUS]: median([first[TUS]!, ...more.tus]) };
    results.push(
      ...(await compare(b, 's3', [
        dropstreamParty(OURS, ours, ctx.s3rverPid),
        directS3Party(DIRECT_S3, ctx, 'direct', b.partSize, b.partsInFlight),
        tusParty(TUS, tus, ctx, 'tus'),
        multerParty(MULTER, multer, ctx, 'multer'),
      ], startPeak, rested, log)),
    );
  } finally {
    await Promise.all([ours.proc.stop(), tus.proc.stop(), multer.proc.stop()]);
  }

  const local = await startOurs(b, 'uploads', 'local');
  const fileDir = join(b.workDir, 'direct-file');
  const busboyDir = join(b.workDir, 'busboy-file');
  await mkdir(fileDir, { recursive: true });
  const busboy = await startBusboyFile(busboyDir);
  try {
    log('local uploads');
    const parties = [dropstreamParty(OURS, local), busboyFileParty(BUSBOY_FILE, busboy), directFileParty(DIRECT_FILE, fileDir)];
    results.push(...(await compare(b, 'local', parties, { [OURS]: local.startupPeakRss, [BUSBOY_FILE]: busboy.startupPeakRss }, {}, log)));
  } finally {
    await Promise.all([local.proc.stop(), busboy.proc.stop()]);
  }
  return results;
}
