// Scenario 3: downloads of one object our service stored, through our public
// link and through the floor of one hop, in one run so the ratios share the
// machine's load:
//   S3 (s3rver): ours proxied; ours with S3_PRESIGNED_DOWNLOADS (the client
//     follows the 302 to the store, as curl -L does); a bare proxy
//     (bench/procs/download-proxy.ts: GetObject piped to the response); a
//     direct GetObject from s3rver; and the peers people run: Express + the
//     SDK's GetObject piped to the response (bench/procs/express-download.ts,
//     as Pingvin Share and Zipline serve S3 files) and @tus/server's GET with
//     @tus/s3-store (bench/procs/tus-server.ts) on an upload made through it
//     (whole only: its GET answers every Range with the whole file);
//   local store: ours; a bare fs.createReadStream -> res server
//     (bench/procs/download-file.ts) reading the same file.
// Cases: whole (the object at once: 1 GiB; 64 MiB with --quick); ranged (64
// requests of 1 MiB at offsets spread over the object, one after another on
// one kept-alive connection).
// Server CPU per byte is the server's CPU seconds per GB delivered.
import { join } from 'node:path';
import pg from 'pg';
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { auth, type Dropstream } from '../lib/dropstream.js';
import { alternate, mbPerSecond, median, round, watch } from '../lib/measure.js';
import { MiB, run } from '../lib/proc.js';
import { procScript, startDownloadFile, startDownloadProxy, startExpressDownload, startTus } from '../lib/servers.js';

const OURS = 'dropstream /download';
const OFFLOAD = 'dropstream /download, presigned (302 followed)';
const PROXY = 'bare node:http proxy';
const DIRECT = 'direct GetObject';
const EXPRESS = 'Express + GetObject piped (Pingvin Share, Zipline)';
const TUS = '@tus/server GET (@tus/s3-store)';
const PEERS = [EXPRESS, TUS];
const OURS_LOCAL = 'dropstream /download (local store)';
const FILE = 'bare fs.createReadStream -> res';
const RANGES = 64;

interface DownloadResult {
  bytes: number;
  wall: number;
  latencies_ms: number[];
  statuses: number[];
  cpu_s: number;
}

interface Party {
  spec: Record<string, unknown>;
  /** The server's pid, when the party has one. */
  pid?: number;
  /** Left out of the ranged case (a server that answers a Range with the whole object). */
  wholeOnly?: boolean;
}

/** The storage key of the file behind a link token (the bare proxy serves the object by it). */
export async function storageKey(databaseUrl: string, linkToken: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const res = await client.query<{ storage_key: string }>('SELECT storage_key FROM files WHERE link_token = $1', [linkToken]);
    return res.rows[0]!.storage_key;
  } finally {
    await client.end();
  }
}

/** Uploads `size` bytes to `server`; its link's URL on that server and its storage key. */
async function uploadOne(b: Bench, server: Dropstream, size: number): Promise<{ url: string; key: string; path: string }> {
  const uploaded = await run<{ uploads: { status: number; body: string }[] }>({
    name: 'upload-client',
    args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${server.url}/api/v1/files/upload`, headers: auth(server), size, count: 1 })],
  });
  const link = JSON.parse(uploaded.uploads[0]!.body).public_link as string;
  const path = new URL(link).pathname;
  return { url: `${server.url}${path}`, path, key: await storageKey(b.db.url, path.split('/').pop()!) };
}

/** Uploads `size` bytes through tus-node-server (POST, one PATCH); the upload's URL, which its GET serves. */
async function uploadTus(url: string, size: number): Promise<string> {
  const uploaded = await run<{ uploads: { status: number; location?: string }[] }>({
    name: 'upload-client',
    args: [procScript('upload-client'), JSON.stringify({ mode: 'tus', url, size, count: 1 })],
  });
  const u = uploaded.uploads[0]!;
  if (u.status !== 204 || !u.location) throw new Error(`tus upload answered ${u.status}`);
  return u.location;
}

const cpuPerGb = (cpuPct: number, mbS: number) => (mbS > 0 ? round(cpuPct / 100 / (mbS / 1000), 3) : 0);

/** Runs `parties` alternately, whole and ranged, and compares the first (ours) with `floor` (and `direct`, when given). */
async function compare(b: Bench, log: (s: string) => void, store: string, size: number, parties: Record<string, Party>, floor: string, direct?: string): Promise<Comparison[]> {
  const ranges: [number, number][] = Array.from({ length: RANGES }, (_, i) => {
    const start = Math.floor((i * (size - MiB)) / (RANGES - 1));
    return [start, start + MiB - 1];
  });
  const out: Comparison[] = [];
  for (const kind of ['whole', 'ranged'] as const) {
    const labels = Object.keys(parties).filter((label) => kind === 'whole' || !parties[label]!.wholeOnly);
    const reps = b.reps ?? (b.quick ? 2 : 3);
    const expected = kind === 'whole' ? size : RANGES * MiB;
    const results = await alternate(labels, reps, async (label, rep) => {
      const { spec, pid } = parties[label]!;
      const { result, watch: w } = await watch({ ...(pid ? { server: pid } : {}), ...(store === 's3' ? { s3rver: b.s3.s3rverPid } : {}) }, () =>
        run<DownloadResult>({ name: 'download-client', args: [procScript('download-client'), JSON.stringify({ ...spec, ...(kind === 'ranged' ? { ranges } : {}) })] }),
      );
      if (result.bytes !== expected) throw new Error(`${label} ${kind}: got ${result.bytes} bytes, expected ${expected} (statuses ${result.statuses})`);
      const mbS = mbPerSecond(result.bytes, result.wall);
      const s = {
        mb_s: mbS,
        median_ms: round(median(result.latencies_ms), 1),
        server_peak_rss_mib: pid ? w.peakRssMib.server! : 0,
        server_cpu_pct: pid ? w.cpuPct.server! : 0,
        server_cpu_s_per_gb: pid ? cpuPerGb(w.cpuPct.server!, mbS) : 0,
        s3rver_cpu_pct: store === 's3' ? w.cpuPct.s3rver! : 0,
        client_cpu_pct: round((result.cpu_s / result.wall) * 100, 0),
        machine_cpu_pct: w.machinePct,
      };
      log(`  ${store} ${kind} #${rep + 1} ${label}: ${s.mb_s} MB/s, median ${s.median_ms} ms, server CPU ${s.server_cpu_pct}% (${s.server_cpu_s_per_gb} s/GB)`);
      return s;
    });
    const sides = labels.map((label) => side(label, results[label]!));
    const by = (label: string) => sides[labels.indexOf(label)]!.median;
    const ours = by(labels[0]!);
    const what = `${store}, ${kind === 'whole' ? `${size / MiB} MiB whole` : `${RANGES} x 1 MiB ranges of ${size / MiB} MiB`}`;
    const ratios: Record<string, number> = {
      [`MB/s vs ${floor}`]: ratio(ours.mb_s!, by(floor).mb_s!),
      [`server CPU per byte vs ${floor}`]: ratio(ours.server_cpu_s_per_gb!, by(floor).server_cpu_s_per_gb!),
    };
    if (direct) {
      ratios[`MB/s vs ${direct}`] = ratio(ours.mb_s!, by(direct).mb_s!);
      ratios[`${floor} MB/s vs ${direct}`] = ratio(by(floor).mb_s!, by(direct).mb_s!);
    }
    for (const peer of PEERS.filter((p) => labels.includes(p))) ratios[`MB/s vs ${peer}`] = ratio(ours.mb_s!, by(peer).mb_s!);
    if (parties[OFFLOAD]) ratios[`${OFFLOAD} MB/s vs ${direct}`] = ratio(by(OFFLOAD).mb_s!, by(direct!).mb_s!);
    out.push({ scenario: 'downloads', case: what, reps, sides, ratios });
  }
  return out;
}

export async function downloads(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const size = (b.quick ? 64 : 1024) * MiB;
  const out: Comparison[] = [];

  // S3: ours proxied and offloaded share the database and the bucket, so one link serves both.
  const server = await startOurs(b, 'downloads', 's3');
  const offloading = await startOurs(b, 'downloads-offload', 's3', { env: { S3_PRESIGNED_DOWNLOADS: 'true' } });
  const proxy = await startDownloadProxy(b.s3.endpoint, 'dropstream');
  const express = await startExpressDownload(b.s3.endpoint, 'dropstream');
  await b.s3.admin.createBucket('tus-downloads');
  const tus = await startTus(b.s3.endpoint, 'tus-downloads', b.workDir);
  try {
    const file = await uploadOne(b, server, size);
    const tusFile = await uploadTus(tus.url, size);
    out.push(
      ...(await compare(b, log, 's3', size, {
        [OURS]: { spec: { mode: 'http', url: file.url }, pid: server.proc.pid },
        [OFFLOAD]: { spec: { mode: 'http', url: `${offloading.url}${file.path}`, follow: true }, pid: offloading.proc.pid },
        [PROXY]: { spec: { mode: 'http', url: `${proxy.url}/${encodeURIComponent(file.key)}` }, pid: proxy.proc.pid },
        [DIRECT]: { spec: { mode: 's3', endpoint: b.s3.endpoint, bucket: 'dropstream', key: file.key } },
        [EXPRESS]: { spec: { mode: 'http', url: `${express.url}/${encodeURIComponent(file.key)}` }, pid: express.proc.pid },
        [TUS]: { spec: { mode: 'http', url: tusFile }, pid: tus.proc.pid, wholeOnly: true },
      }, PROXY, DIRECT)),
    );
  } finally {
    await tus.proc.stop();
    await b.s3.admin.empty('tus-downloads');
    await express.proc.stop();
    await proxy.proc.stop();
    await offloading.proc.stop();
    await server.proc.stop();
  }

  // The local store: ours against a bare file server reading the same file.
  const local = await startOurs(b, 'downloads', 'local');
  let bare: Awaited<ReturnType<typeof startDownloadFile>> | undefined;
  try {
    const file = await uploadOne(b, local, size);
    bare = await startDownloadFile(join(local.dataDir, 'objects'));
    out.push(
      ...(await compare(b, log, 'local', size, {
        [OURS_LOCAL]: { spec: { mode: 'http', url: file.url }, pid: local.proc.pid },
        [FILE]: { spec: { mode: 'http', url: `${bare.url}/${encodeURIComponent(file.key)}` }, pid: bare.proc.pid },
      }, FILE)),
    );
  } finally {
    await bare?.proc.stop();
    await local.proc.stop();
  }
  return out;
}
