// bench/results.json (everything, every sample) and bench/RESULTS.md (the
// medians, the ratios and the targets of issues #6 and #10, in tables).
import { readFile, writeFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { side, type Comparison } from './context.js';
import { BUSBOY_FILE } from '../scenarios/uploads.js';

export interface Meta {
  mode: string;
  date: string;
  duration_s: number;
  machine: Awaited<ReturnType<typeof machineInfo>>;
  command: string;
  server_env: Record<string, string>;
  /** Scenarios that failed ("name: message"); their results are missing. */
  failed?: string[];
}

export async function machineInfo() {
  const release = await readFile('/etc/os-release', 'utf8').catch(() => '');
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memory_gib: Number((totalmem() / 1024 ** 3).toFixed(1)),
    os: /PRETTY_NAME="([^"]+)"/.exec(release)?.[1] ?? process.platform,
    kernel: (await readFile('/proc/sys/kernel/osrelease', 'utf8').catch(() => '')).trim(),
    node: process.version,
  };
}

interface Target {
  target: string;
  measured: string;
  met: boolean | null;
}

/** Server CPU per byte: core-seconds per GB (10^9 bytes), from a side's CPU % of one core and MB/s. */
const cpuPerGb = (m: Record<string, number> | undefined) => (m?.party_cpu_pct === undefined || !m.mb_s ? undefined : Math.round((m.party_cpu_pct / m.mb_s) * 1000) / 100);

const find = (results: Comparison[], scenario: string, kase: string) => results.find((r) => r.scenario === scenario && r.case === kase);
const oursMedian = (c: Comparison | undefined, key: string) => c?.sides[0]?.median[key];

/** The targets of issues #6 and #10, checked against the medians (null: not measured in this mode). */
export function targets(results: Comparison[]): Target[] {
  const out: Target[] = [];
  const uploads = results.filter((r) => r.scenario === 'uploads' && r.case.startsWith('s3'));
  for (const c of uploads) {
    const vsDirect = c.ratios['MB/s vs direct lib-storage'];
    if (vsDirect !== undefined) out.push({ target: `upload ${c.case}: >= 0.8x direct lib-storage`, measured: `${vsDirect}x`, met: vsDirect >= 0.8 });
    const peers = Object.entries(c.ratios).filter(([k]) => /tus|multer/.test(k));
    if (peers.length) {
      out.push({
        target: `upload ${c.case}: faster than both peers`,
        measured: peers.map(([k, v]) => `${v}x ${k.replace('MB/s vs ', '')}`).join(', '),
        met: peers.every(([, v]) => v > 1),
      });
    }
  }
  // Issue 42: the local store against its fair limit, node:http + busboy into a file (bench/procs/busboy-file-server.ts).
  for (const c of results.filter((r) => r.scenario === 'uploads' && r.case.startsWith('local'))) {
    const v = c.ratios[`MB/s vs ${BUSBOY_FILE}`];
    if (v !== undefined) out.push({ target: `upload ${c.case}: >= 0.8x ${BUSBOY_FILE}`, measured: `${v}x`, met: v >= 0.8 });
  }
  const big = oursMedian(find(results, 'uploads', 's3, 5120 MiB'), 'peak_rss_mib');
  const gib = oursMedian(find(results, 'uploads', 's3, 1024 MiB'), 'peak_rss_mib');
  out.push({ target: 'peak RSS, one 5 GiB upload (S3): < 128 MiB', measured: big === undefined ? 'not run' : `${big} MiB`, met: big === undefined ? null : big < 128 });
  out.push({
    target: 'peak RSS, 5 GiB <= 1 GiB + 10 MiB',
    measured: big === undefined || gib === undefined ? 'not run' : `${big} vs ${gib} MiB (+${(big - gib).toFixed(1)})`,
    met: big === undefined || gib === undefined ? null : big - gib <= 10,
  });
  const c32 = oursMedian(find(results, 'concurrency', '32 x 64 MiB'), 'peak_rss_mib');
  out.push({ target: 'peak RSS, 32 concurrent 64 MiB uploads: < 512 MiB', measured: c32 === undefined ? 'not run' : `${c32} MiB`, met: c32 === undefined ? null : c32 < 512 });
  // Issue 41: against the floor of one hop measured in the same run (the bare proxy on S3, the bare file server on the local store).
  for (const c of results.filter((r) => r.scenario === 'downloads')) {
    for (const [name, v] of Object.entries(c.ratios)) {
      const floor = /^MB\/s vs (bare .*)$/.exec(name)?.[1];
      if (floor) out.push({ target: `download ${c.case}: >= 0.95x the ${floor}`, measured: `${v}x`, met: v >= 0.95 });
      const cpu = /^server CPU per byte vs (bare .*)$/.exec(name)?.[1];
      if (cpu && c.case.includes('whole')) out.push({ target: `download ${c.case}: server CPU per byte <= 1.1x the ${cpu}'s`, measured: `${v}x`, met: v <= 1.1 });
      if (name.includes('presigned') && c.case.includes('whole')) out.push({ target: `download ${c.case}, presigned and followed: >= 0.9x direct GetObject`, measured: `${v}x`, met: v >= 0.9 });
    }
  }
  // bench/scenarios/resumable.ts (issue 42): the whole file in one PATCH at least 0.95x the plain upload's MB/s, 64 MiB PATCHes 0.9x; the server's CPU per byte beside.
  for (const c of results.filter((r) => r.scenario === 'resumable')) {
    for (const [name, v] of Object.entries(c.ratios)) {
      const tus = name.includes(':') ? name.slice(0, name.indexOf(':')) : c.sides[0]?.label ?? 'tus';
      const min = tus.includes('one PATCH') ? 0.95 : 0.9;
      const plain = c.sides.find((s) => name.endsWith(s.label));
      const cpu = [c.sides.find((s) => s.label === tus), plain].map((s) => cpuPerGb(s?.median));
      const beside = cpu.every((x) => x !== undefined) ? ` (server CPU ${cpu[0]} vs ${cpu[1]} core-s/GB)` : '';
      out.push({ target: `resumable ${c.case}, ${tus}: >= ${min}x the plain upload`, measured: `${v}x${beside}`, met: v >= min });
    }
  }
  out.push(...metadataTargets(results));
  out.push(...memoryTargets(results));
  return out;
}

/** Issue 24: memory against the peers on the same machine, and back after load. */
function memoryTargets(results: Comparison[]): Target[] {
  const out: Target[] = [];
  const partyMedian = (c: Comparison | undefined, label: string, key: string) => c?.sides.find((s) => s.label === label)?.median[key];
  const first = results.find((r) => r.scenario === 'uploads' && r.case.startsWith('s3') && r.startupRssMib);
  // Issue 24 asks for idle after start, the target that counts; the peak while starting is accepted as it is (issue 42), shown, not judged.
  const againstTus = (label: string, rss: Record<string, number> | undefined, judged: boolean) => {
    const ours = rss?.dropstream;
    const tus = rss?.['tus-node-server'];
    if (ours === undefined || tus === undefined) return;
    const measured = `${(ours / tus).toFixed(2)}x (${ours} vs ${tus} MiB)`;
    if (judged) out.push({ target: `${label} (PostgreSQL, S3): <= 1.2x tus-node-server`, measured, met: ours <= 1.2 * tus });
    else out.push({ target: `${label} (PostgreSQL, S3): against tus-node-server, accepted as it is (issue 42)`, measured, met: null });
  };
  againstTus('idle 30 s after start, no request yet', first?.idleRssMib, true);
  againstTus('peak RSS right after start', first?.startupRssMib, false);
  const big = find(results, 'uploads', 's3, 5120 MiB');
  const bigOurs = oursMedian(big, 'peak_rss_mib');
  const bigTus = partyMedian(big, 'tus-node-server', 'peak_rss_mib');
  if (bigOurs !== undefined && bigTus !== undefined) {
    out.push({ target: 'peak RSS, one 5 GiB upload: <= tus-node-server', measured: `${bigOurs} vs ${bigTus} MiB`, met: bigOurs <= bigTus });
  }
  for (const c of results.filter((r) => r.scenario === 'metadata')) {
    const o = oursMedian(c, 'server_peak_rss_mib') ?? oursMedian(c, 'peak_rss_mib');
    const ceiling = c.sides.find((s) => s.label.startsWith('ceiling party, key cached'));
    const top = ceiling?.median.server_peak_rss_mib ?? ceiling?.median.peak_rss_mib;
    if (o !== undefined && top !== undefined) {
      out.push({ target: `${c.case}: peak RSS <= 1.25x the ceiling party's`, measured: `${(o / top).toFixed(2)}x (${o} vs ${top} MiB)`, met: o <= 1.25 * top });
    }
  }
  // Memory must not cost speed: 32 uploads against as many direct lib-storage uploads in the same run (issue 42; full mode only).
  const c32 = find(results, 'concurrency', '32 x 64 MiB');
  const c32Ratio = c32?.ratios['MB/s vs direct lib-storage'];
  if (c32Ratio !== undefined) {
    const direct = partyMedian(c32, 'direct lib-storage', 'mb_s');
    out.push({ target: "32 concurrent 64 MiB uploads: >= 0.95x direct lib-storage's total in the same run", measured: `${c32Ratio}x (${oursMedian(c32, 'mb_s')} vs ${direct} MB/s)`, met: c32Ratio >= 0.95 });
  }
  for (const c of results.filter((r) => r.scenario === 'soak')) {
    const v = c.ratios['idle after / after start']!;
    out.push({ target: `idle after ${c.case}: <= 1.25x idle after start`, measured: `${v}x (${oursMedian(c, 'idle_after_soak_mib')} vs ${oursMedian(c, 'idle_after_start_mib')} MiB)`, met: v <= 1.25 });
  }
  return out;
}

/** Issue 10: the metadata endpoints against the ceiling party, against each other, and at 100,000 files. */
function metadataTargets(results: Comparison[]): Target[] {
  const out: Target[] = [];
  const meta = results.filter((r) => r.scenario === 'metadata');
  const reqs = (kase: string) => oursMedian(meta.find((c) => c.case === kase), 'req_s');
  const one = meta.find((c) => c.case === 'GET /api/v1/files/{id}');
  if (!one) return out;
  // Issue 41: at least the rate of both ceiling parties (key cached, key looked up per request), and a p99 within 1.25x of theirs.
  for (const [name, v] of Object.entries(one.ratios).filter(([k]) => k.startsWith('req/s vs ') && k.includes('ceiling'))) {
    out.push({ target: `GET /api/v1/files/{id}: >= 1.0x the ${name.replace('req/s vs ', '')}`, measured: `${v}x`, met: v >= 1 });
  }
  for (const [name, v] of Object.entries(one.ratios).filter(([k]) => k.startsWith('p99 vs ') && k.includes('ceiling'))) {
    out.push({ target: `GET /api/v1/files/{id}: p99 <= 1.25x the ${name.replace('p99 vs ', '')}'s`, measured: `${v}x`, met: v <= 1.25 });
  }
  const p99 = oursMedian(one, 'p99_ms')!;
  out.push({ target: 'GET /api/v1/files/{id}: p99 < 30 ms at 50 connections', measured: `${p99} ms`, met: p99 < 30 });
  for (const path of ['/api/v1/files', '/api/v1/stats']) {
    const r = reqs(`GET ${path}`);
    if (r === undefined) continue;
    const v = Number((r / reqs('GET /api/v1/files/{id}')!).toFixed(2));
    out.push({ target: `GET ${path}: >= 0.8x of GET /api/v1/files/{id}`, measured: `${v}x (${r} vs ${reqs('GET /api/v1/files/{id}')} req/s)`, met: v >= 0.8 });
    const many = meta.find((c) => c.case.startsWith(`GET ${path} (`));
    const m = oursMedian(many, 'req_s');
    if (many && m !== undefined) {
      const slower = Number((r / m).toFixed(2));
      out.push({ target: `${many.case}: within 1.25x of 25 files`, measured: `25 files / 100,000 files = ${slower}x (${r} vs ${m} req/s)`, met: slower <= 1.25 });
    }
  }
  return out;
}

const COLUMNS: Record<string, string> = {
  mb_s: 'MB/s',
  resent_pct: 'resent, % of the file',
  resume_after_cut_s: 's from the cut to the resuming PATCH',
  finish_after_cut_s: 's from the cut to the end',
  seconds: 's',
  peak_rss_mib: 'peak RSS MiB',
  party_cpu_pct: 'CPU %',
  server_peak_rss_mib: 'server peak RSS MiB',
  server_cpu_pct: 'server CPU %',
  s3rver_cpu_pct: 's3rver CPU %',
  client_cpu_pct: 'client CPU %',
  postgres_cpu_pct: 'PostgreSQL CPU %',
  redis_cpu_pct: 'Redis CPU %',
  autocannon_cpu_pct: 'autocannon CPU %',
  machine_cpu_pct: 'machine CPU %',
  other_cpu_pct: 'other CPU %',
  median_ms: 'median ms',
  one_gib_mb_s: '1 GiB MB/s',
  one_gib_peak_rss_mib: '1 GiB peak RSS MiB',
  c32_mb_s: '32 x 64 MiB MB/s',
  c32_peak_rss_mib: '32 x 64 MiB peak RSS MiB',
  idle_peak_rss_mib: 'peak RSS after start MiB',
  req_s: 'req/s',
  sql_per_request: 'SQL statements',
  redis_per_request: 'Redis round trips',
  p50_ms: 'p50 ms',
  p99_ms: 'p99 ms',
};

function table(comparisons: Comparison[]): string[] {
  if (!comparisons.length) return ['Not run in this mode.', ''];
  const keys = Object.keys(comparisons[0]!.sides[0]!.median);
  const lines = [
    `| case | party | ${keys.map((k) => COLUMNS[k] ?? k).join(' | ')} | ratio (median) | runs |`,
    `|---|---|${keys.map(() => '---:').join('|')}|---|---:|`,
  ];
  for (const c of comparisons) {
    c.sides.forEach((s, i) => {
      const r = i === 0 ? '' : Object.entries(c.ratios).find(([k]) => k.endsWith(s.label));
      const ratioText = r ? `ours ${r[1]}x` : '';
      lines.push(`| ${i === 0 ? c.case : ''} | ${s.label} | ${keys.map((k) => s.median[k] ?? '').join(' | ')} | ${ratioText} | ${c.reps} |`);
    });
  }
  return [...lines, ''];
}

const SECTIONS: [Comparison['scenario'], string, string][] = [
  ['uploads', 'Uploads, one at a time', 'Our server (`node bin/dropstream.js serve`, PostgreSQL, Redis) against the limit (direct lib-storage into the same s3rver with the same 8 MiB parts, 2 in flight / a bare node:http server piping the same multipart body through busboy into a file with the same fsync policy, and a bare Node process piping to a file, no HTTP) and the peers. Peak RSS is the party\'s own process (server, or the direct uploader). CPU % is of one core; machine CPU % is of both cores (100 = saturated).'],
  ['direct', 'Uploads straight to the store', 'Our service\'s direct upload (S3_DIRECT_UPLOADS: a client process creates it, PUTs the parts to the URLs the service signed, 2 at once, and completes it) against direct lib-storage into the same s3rver with the same part size and parts in flight. Party CPU is the uploading client\'s; the service\'s own CPU, per GB, is in `server_core_s_per_gb`.'],
  ['resumable', 'Resumable uploads (tus) against the plain upload', 'The same bytes into the same server: `POST /api/v1/uploads` and PATCHes of 64 MiB (tus) against one multipart `POST /api/v1/files/upload`. Peak RSS is the server\'s. Targets (issue 42): the whole file in one PATCH at least 0.95x the plain upload\'s MB/s, 64 MiB PATCHes 0.9x; the server\'s CPU per byte (core-seconds per GB) beside them.'],
  ['resumable-cuts', 'Resumable uploads through a cut connection (tus-js-client)', 'tus-js-client 4 (default retry delays 0, 1, 3, 5 s, the whole file in one PATCH) uploads 256 MiB through a TCP proxy (`test/helpers/cutting-proxy.ts`) that cuts the connection once a third of the file has passed: *silent* closes only the client\'s side (the server\'s stays open and hears nothing more: a laptop changing networks), *reset* closes both. The peer is tus-node-server (`@tus/server` with `@tus/file-store` or `@tus/s3-store`, `bench/procs/tus-server.ts`). Resent is what the client sent through the proxy beyond the file\'s size (issue 19: at most 5%); the seconds run from the cut to the start of the PATCH that resumed (the takeover: HEAD, the old request letting go) and to tus-js-client\'s success (which adds the rest of the file at each server\'s speed; ours hashes and fsyncs). Stored sizes (and our SHA-256) are checked.'],
  ['concurrency', 'Concurrent 64 MiB uploads (S3)', 'Total MB/s over all uploads; peak RSS of the server (ours) or of the one uploading process (direct).'],
  ['downloads', 'Downloads (S3 and the local store)', 'Our public link against the floor of one hop in the same run: on S3 a bare node:http proxy (`bench/procs/download-proxy.ts`: GetObject piped to the response, no framework, database, limit or log line), on the local store a bare node:http server piping `fs.createReadStream` to the response (`bench/procs/download-file.ts`); on S3 also our link with `S3_PRESIGNED_DOWNLOADS` (the client follows the 302 to s3rver, as `curl -L` does), a GetObject of the same key straight from s3rver, and the peers people run: Express + the SDK\'s GetObject piped to the response (`bench/procs/express-download.ts`, as Pingvin Share and Zipline serve S3 files; Range passed on) and `@tus/server`\'s GET with `@tus/s3-store` on an upload made through it (whole downloads only: its GET answers a Range with the whole object). All read by a client process that discards the bytes. Server CPU per byte: the server\'s CPU seconds per GB delivered.'],
  ['knobs', 'Memory knobs (our server alone, one run each)', 'Peak RSS and throughput of one 1 GiB upload and of 32 simultaneous 64 MiB uploads under other settings. Part buffers per upload are S3_PARTS_IN_FLIGHT x S3_PART_SIZE; `--max-semi-space-size=1` (V8 flag, via NODE_OPTIONS) makes V8 collect the 64 KiB socket reads sooner.'],
  ['metadata', 'Metadata endpoints (autocannon, 50 connections)', 'Our server with PostgreSQL and Redis (rate limits counted in Redis on every request, one log line per request) against the ceiling party (`bench/procs/ceiling.ts`: Koa + @koa/router + pg + ioredis on the same database, Redis and account, per request the key\'s SHA-256 -> account and plan in one SQL join (once a second per key when cached, as ours; every request when not), both counters in one Redis script, the row(s), the same JSON (checked), one pino line) and a bare Koa app answering the same JSON from memory. The 100,000-file account\'s rows are inserted by SQL and its counters set by `dropstream gc`; the last page is OFFSET 99,980.'],
  ['soak', 'Soak: memory back after mixed load (S3)', 'Our server on s3rver takes plain and resumable uploads of 1-48 MiB, whole downloads of them and metadata requests at 16 connections for a few minutes (`bench/scenarios/soak.ts`); idle is VmRSS after 30 s without requests, right after start, after a warm-up of one request of each kind, and after the soak. Target: idle after the soak within 1.25x of idle after start.'],
  ['roundtrips', 'Round trips per request', 'SQL statements (pg_stat_statements, top-level statements, on a private PostgreSQL) and Redis round trips (MONITOR, commands carrying our key prefix, a MULTI/EXEC block counted once, nothing a Lua script runs inside Redis) per request, averaged over the requests of each case sent one at a time after a warm-up (so our key cache is warm: its lookup, three statements, happens once a second per key). Local object store; the runs column is the number of requests.'],
];

export function markdown(meta: Meta, results: Comparison[]): string {
  const m = meta.machine;
  const lines = [
    '# Benchmark results',
    '',
    `Written by \`${meta.command}\` (${meta.mode} mode) on ${meta.date}, in ${Math.round(meta.duration_s / 60)} min.`,
    '',
    ...(meta.failed?.length ? [`**Failed, so missing from this report:** ${meta.failed.join('; ')}.`, ''] : []),
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memory_gib} GiB RAM, ${m.os}, Linux ${m.kernel}; Node ${m.node}.`,
    `Server settings: defaults (8 MiB parts, 2 in flight, UPLOAD_CONCURRENCY 32) with MALLOC_ARENA_MAX=2, MALLOC_MMAP_THRESHOLD_=65536${Object.keys(meta.server_env).length ? `; overrides: ${Object.entries(meta.server_env).map(([k, v]) => `${k}=${v}`).join(', ')}` : ''}.`,
    '',
    `**Two cores are shared** by s3rver (single-threaded, the slowest party in every S3 run), the server under test and the client;`,
    'the CPU columns show who was busy. Every party runs in its own process; peak RSS is the kernel\'s VmHWM of that process, reset',
    '(`/proc/<pid>/clear_refs`) before each run. Each comparison runs its sides alternately in the same session, rotating which goes',
    'first; the tables show medians and the ratio of medians. MB/s is 10^6 bytes per second.',
    '',
    '## Targets (issues #6 and #10)',
    '',
    '| target | measured | met |',
    '|---|---|---|',
    ...targets(results).map((t) => `| ${t.target} | ${t.measured} | ${t.met === null ? '-' : t.met ? 'yes' : '**no**'} |`),
    '',
  ];
  for (const [scenario, title, about] of SECTIONS) {
    lines.push(`## ${title}`, '', about, '', ...table(results.filter((r) => r.scenario === scenario)));
    for (const c of results.filter((r) => r.scenario === scenario && r.notes?.length)) lines.push(...c.notes!.map((n) => `- ${c.case}: ${n}`), '');
  }
  lines.push('Every sample is in `bench/results.json`. Reproduce with `npm run bench` (about 35 minutes), `npm run bench -- --only metadata` (the API endpoints and the round trips, about 20) or `npm run bench -- --quick` (a few).', '');
  return lines.join('\n');
}

/** Writes results.json and RESULTS.md into `dir`; returns their paths. */
export async function writeReport(meta: Meta, results: Comparison[], dir: string): Promise<string[]> {
  const json = join(dir, 'results.json');
  const md = join(dir, 'RESULTS.md');
  await writeFile(json, `${JSON.stringify({ ...meta, targets: targets(results), comparisons: results }, null, 2)}\n`);
  await writeFile(md, markdown(meta, results));
  return [json, md];
}

/**
 * `npx tsx bench/lib/report.ts [dir]` rewrites RESULTS.md from results.json
 * (after a change to the tables). Runs from before negative group CPU was
 * clamped in measure.ts get it clamped here too: a group of processes loses
 * the CPU time of members that exit mid-run, so its difference can go below 0.
 */
if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv[2] ?? 'bench';
  const saved = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8')) as Meta & { comparisons: Comparison[] };
  const { comparisons, ...meta } = saved;
  for (const c of comparisons) {
    c.sides = c.sides.map((s) => side(s.label, s.samples.map((x) => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, k.endsWith('_cpu_pct') ? Math.max(0, v) : v])))));
  }
  console.log(await writeReport(meta as Meta, comparisons, dir));
}
