// Before/after numbers for a change to the server: runs two builds side by
// side in one session, alternately, against the same s3rver, PostgreSQL
// database and Redis, and prints medians and ratios.
//
//   cp -r bin dist prisma package.json bench/data/before/   # before the change
//   ...change src..., npm run build
//   npx tsx bench/compare-builds.ts [--a bench/data/before] [--b .] [--reps 5]
//       [--a-env '{"S3_PARTS_IN_FLIGHT":"1"}'] [--b-env '{...}']   (settings per side;
//        REDIS_URL "" runs that side's limits in memory)
//       [--upload 1024] [--tus 256] [--download 1024] [--metadata /api/v1/files/{id}] [--seconds 10]
//   --download: whole and 64 x 1 MiB ranged downloads from A, B and the bare
//   node:http proxy of bench/scenarios/downloads.ts (P), alternately.
//
// Each build is a folder holding bin/, dist/, prisma/ and package.json (the
// server finds its migrations next to dist/). Its own bin/dropstream.js runs
// it, with the V8 and glibc settings it sets; a folder without bin/ runs
// dist/cli/index.js, without them. Only the parts asked for run: --upload
// (MiB, S3), --tus (MiB, S3: tus in 64 MiB PATCHes and the plain upload on
// each side, all four alternating, so each side has its ratio of the same
// run), --download (MiB, whole, S3) and/or --metadata (a path; autocannon
// at 50 connections).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { auth, createDatabase, migrate, REDIS_URL, startDropstream, type Dropstream } from './lib/dropstream.js';
import { alternate, median, round, watch } from './lib/measure.js';
import { cpuSecondsOf, MiB, run, setLogDir } from './lib/proc.js';
import { S3Admin } from './lib/s3.js';
import { procScript, startDownloadProxy, startS3rver } from './lib/servers.js';
import { storageKey } from './scenarios/downloads.js';
import { dropstreamParty, type UploadParty } from './lib/uploads.js';
import { tusParty } from './scenarios/resumable.js';

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: 'bench/data/before' },
    b: { type: 'string', default: '.' },
    'a-env': { type: 'string', default: '{}' },
    'b-env': { type: 'string', default: '{}' },
    reps: { type: 'string', default: '5' },
    upload: { type: 'string' },
    tus: { type: 'string' },
    download: { type: 'string' },
    metadata: { type: 'string' },
    seconds: { type: 'string', default: '10' },
  },
});
const reps = Number(values.reps);
// The child scripts (clients, s3rver) run compiled, as in bench/run.ts.
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.json']);
const work = join('bench', 'data', 'compare');
await rm(work, { recursive: true, force: true });
await mkdir(join(work, 'logs'), { recursive: true });
setLogDir(join(work, 'logs'));

// A build's own launcher when it has one: it sets the V8 and glibc settings `serve` runs with.
const entry = (dir: string) => (existsSync(join(dir, 'bin', 'dropstream.js')) ? join(dir, 'bin', 'dropstream.js') : join(dir, 'dist', 'cli', 'index.js'));
const db = await createDatabase();
const s3 = await startS3rver();
const servers: Record<string, Dropstream> = {};
try {
  await migrate(db.url);
  for (const [name, dir, env] of [['A', values.a!, values['a-env']!], ['B', values.b!, values['b-env']!]] as const) {
    await mkdir(join(work, name), { recursive: true });
    servers[name] = await startDropstream({
      name: `dropstream-${name}`,
      entry: entry(dir),
      databaseUrl: db.url,
      dataDir: join(work, name),
      redisKeyPrefix: `dropstream-compare-${process.pid}-${name}`,
      s3: { endpoint: s3.endpoint, bucket: 'dropstream' },
      env: JSON.parse(env) as Record<string, string>,
    });
  }
  console.log(`A = ${values.a} ${values['a-env']}, B = ${values.b} ${values['b-env']}; ${reps} runs each, alternating`);
  const show = (what: string, key: string, res: Record<'A' | 'B', Record<string, number>[]>) => {
    const a = median(res.A.map((s) => s[key]!));
    const b = median(res.B.map((s) => s[key]!));
    console.log(`${what} ${key}: A ${round(a, 1)}  B ${round(b, 1)}  B/A ${round(b / a, 2)}   (A ${res.A.map((s) => s[key]).join(', ')}; B ${res.B.map((s) => s[key]).join(', ')})`);
  };

  if (values.upload) {
    const size = Number(values.upload) * MiB;
    const parties = { A: dropstreamParty('A', servers.A!, s3.proc.pid), B: dropstreamParty('B', servers.B!, s3.proc.pid) };
    await parties.A.upload(8 * MiB, 1);
    await parties.B.upload(8 * MiB, 1);
    const res = await alternate(['A', 'B'] as const, reps, async (side) => (await parties[side].upload(size, 1)) as unknown as Record<string, number>);
    for (const key of ['mb_s', 'peak_rss_mib', 'party_cpu_pct', 's3rver_cpu_pct', 'other_cpu_pct']) show(`upload ${values.upload} MiB`, key, res);
  }

  if (values.tus) {
    const size = Number(values.tus) * MiB;
    const parties: Record<string, UploadParty> = {};
    for (const side of ['A', 'B'] as const) {
      parties[`${side} tus`] = tusParty(`${side} tus`, servers[side]!, 64 * MiB, s3.proc.pid);
      parties[`${side} plain`] = dropstreamParty(`${side} plain`, servers[side]!, s3.proc.pid);
    }
    for (const p of Object.values(parties)) await p.upload(8 * MiB, 1);
    const labels = Object.keys(parties);
    const res = await alternate(labels, reps, async (label) => {
      const s = await parties[label]!.upload(size, 1);
      // Server CPU per byte: core-seconds per GB.
      const perGb = round(((s.party_cpu_pct / 100) * s.seconds) / (size / 1e9), 2);
      console.log(`  ${label}: ${s.mb_s} MB/s, server ${s.party_cpu_pct}% (${perGb} core-s/GB), s3rver ${s.s3rver_cpu_pct}%, other ${s.other_cpu_pct}%`);
      return { ...s, core_s_per_gb: perGb } as unknown as Record<string, number>;
    });
    for (const key of ['mb_s', 'core_s_per_gb', 'party_cpu_pct', 's3rver_cpu_pct']) {
      const m = Object.fromEntries(labels.map((l) => [l, median(res[l]!.map((s) => s[key]!))]));
      console.log(`tus ${values.tus} MiB ${key}: ${labels.map((l) => `${l} ${round(m[l]!, 2)}`).join(', ')}; tus/plain A ${round(m['A tus']! / m['A plain']!, 2)}, B ${round(m['B tus']! / m['B plain']!, 2)}`);
    }
  }

  if (values.download) {
    // Whole downloads and 64 ranges of 1 MiB (one kept-alive connection, as
    // in bench/scenarios/downloads.ts) from A, B and the bare node:http proxy
    // (P: GetObject piped to the response) serving B's object, alternately.
    const size = Number(values.download) * MiB;
    const urls: Record<string, string> = {};
    let token = '';
    for (const side of ['A', 'B'] as const) {
      const up = await run<{ uploads: { body: string }[] }>({ name: 'upload-client', args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${servers[side]!.url}/api/v1/files/upload`, headers: auth(servers[side]!), size, count: 1 })] });
      const path = new URL(JSON.parse(up.uploads[0]!.body).public_link).pathname;
      urls[side] = `${servers[side]!.url}${path}`;
      token = path.split('/').pop()!;
    }
    const proxy = await startDownloadProxy(s3.endpoint, 'dropstream');
    try {
      urls.P = `${proxy.url}/${encodeURIComponent(await storageKey(db.url, token))}`;
      const pids: Record<string, number> = { A: servers.A!.proc.pid!, B: servers.B!.proc.pid!, P: proxy.proc.pid! };
      const ranges: [number, number][] = Array.from({ length: 64 }, (_, i) => {
        const start = Math.floor((i * (size - MiB)) / 63);
        return [start, start + MiB - 1];
      });
      for (const kind of ['whole', 'ranged'] as const) {
        const expected = kind === 'whole' ? size : 64 * MiB;
        const res = await alternate(['A', 'B', 'P'] as const, reps, async (side) => {
          const { result, watch: w } = await watch({ server: pids[side]!, s3rver: s3.proc.pid }, () =>
            run<{ bytes: number; wall: number }>({ name: 'download-client', args: [procScript('download-client'), JSON.stringify({ mode: 'http', url: urls[side], ...(kind === 'ranged' ? { ranges } : {}) })] }),
          );
          if (result.bytes !== expected) throw new Error(`${side}: downloaded ${result.bytes} bytes`);
          const mbS = round(result.bytes / 1e6 / result.wall, 1);
          return { mb_s: mbS, server_cpu_pct: w.cpuPct.server!, core_s_per_gb: round(w.cpuPct.server! / 100 / (mbS / 1000), 3), s3rver_cpu_pct: w.cpuPct.s3rver! };
        });
        const what = kind === 'whole' ? `download ${values.download} MiB whole` : `download 64 x 1 MiB ranges`;
        for (const key of ['mb_s', 'core_s_per_gb', 'server_cpu_pct', 's3rver_cpu_pct'] as const) {
          const m = Object.fromEntries((['A', 'B', 'P'] as const).map((side) => [side, median(res[side].map((r) => r[key]!))]));
          console.log(`${what} ${key}: A ${round(m.A!, 2)}  B ${round(m.B!, 2)}  P ${round(m.P!, 2)}  B/A ${round(m.B! / m.A!, 2)}  A/P ${round(m.A! / m.P!, 2)}  B/P ${round(m.B! / m.P!, 2)}   (A ${res.A.map((r) => r[key]).join(', ')}; B ${res.B.map((r) => r[key]).join(', ')}; P ${res.P.map((r) => r[key]).join(', ')})`);
        }
      }
    } finally {
      await proxy.proc.stop();
    }
  }

  if (values.metadata) {
    const path = values.metadata;
    // {id} in the path becomes the side's first file (each side has an account of its own).
    const paths: Record<string, string> = {};
    for (const side of ['A', 'B'] as const) {
      const seeded = await run<{ uploads: { body: string }[] }>({ name: 'upload-client', args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${servers[side]!.url}/api/v1/files/upload`, headers: auth(servers[side]!), size: 1024, count: 24 })] });
      // 24 at once: one account holds at most 24 of the 32 upload slots (a 25th is 503 server_busy).
      // An upload refused anyway (an older build, other limits) has no file_id; the others do.
      const ids = seeded.uploads.map((u) => (JSON.parse(u.body) as { file_id?: number }).file_id).filter((id): id is number => Number.isInteger(id));
      paths[side] = path.replace('{id}', String(Math.min(...ids)));
    }
    const cannon = (side: 'A' | 'B', seconds: number) =>
      run<{ requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number }>({
        name: 'autocannon',
        args: [procScript('load'), JSON.stringify({ url: `${servers[side]!.url}${paths[side]}`, connections: 50, seconds, headers: auth(servers[side]!) })],
      });
    await cannon('A', 2);
    await cannon('B', 2);
    const res = await alternate(['A', 'B'] as const, reps, async (side) => {
      const { result: r, watch: w } = await watch({ server: servers[side]!.proc.pid }, () => cannon(side, Number(values.seconds)), {
        postgres: () => cpuSecondsOf((cmd) => cmd.startsWith('postgres:') && cmd.includes(` ${db.name} `)),
      });
      if (r.non2xx) throw new Error(`${side}: ${r.non2xx} non-2xx answers`);
      return { req_s: Math.round(r.requests.average), p50_ms: r.latency.p50, p99_ms: r.latency.p99, peak_rss_mib: w.peakRssMib.server!, server_cpu_pct: w.cpuPct.server!, postgres_cpu_pct: w.cpuPct.postgres! };
    });
    for (const key of ['req_s', 'p50_ms', 'p99_ms', 'peak_rss_mib', 'server_cpu_pct', 'postgres_cpu_pct']) show(`GET ${path}`, key, res);
  }
} finally {
  await Promise.all(Object.values(servers).map((s) => s.proc.stop()));
  new S3Admin(s3.endpoint).close();
  await s3.proc.stop();
  await db.drop();
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  const keys = await redis.keys(`dropstream-compare-${process.pid}-*`).catch(() => [] as string[]);
  if (keys.length) await redis.del(...keys).catch(() => {});
  redis.disconnect();
}
