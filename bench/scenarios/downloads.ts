// Scenario 3: downloads of one object our service stored in s3rver, through
// our public link, through a bare proxy (bench/procs/download-proxy.ts: the
// cost of the extra hop alone) and by a direct GetObject of the same key
// from s3rver.
//   whole:  the object at once (1 GiB; 64 MiB with --quick);
//   ranged: 64 requests of 1 MiB at offsets spread over the object, one
//           after another on one kept-alive connection.
import pg from 'pg';
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { auth } from '../lib/dropstream.js';
import { alternate, mbPerSecond, median, round, watch } from '../lib/measure.js';
import { MiB, run } from '../lib/proc.js';
import { procScript, startDownloadProxy } from '../lib/servers.js';

const OURS = 'dropstream /download';
const PROXY = 'bare node:http proxy';
const DIRECT = 'direct GetObject';
const RANGES = 64;

interface DownloadResult {
  bytes: number;
  wall: number;
  latencies_ms: number[];
  statuses: number[];
  cpu_s: number;
}

async function storageKey(databaseUrl: string, linkToken: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const res = await client.query<{ storage_key: string }>('SELECT storage_key FROM files WHERE link_token = $1', [linkToken]);
    return res.rows[0]!.storage_key;
  } finally {
    await client.end();
  }
}

export async function downloads(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const size = (b.quick ? 64 : 1024) * MiB;
  const server = await startOurs(b, 'downloads', 's3');
  const proxy = await startDownloadProxy(b.s3.endpoint, 'dropstream');
  const out: Comparison[] = [];
  try {
    const uploaded = await run<{ uploads: { status: number; body: string }[] }>({
      name: 'upload-client',
      args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${server.url}/api/v1/files/upload`, headers: auth(server), size, count: 1 })],
    });
    const link = JSON.parse(uploaded.uploads[0]!.body).public_link as string;
    const url = `${server.url}${new URL(link).pathname}`;
    const key = await storageKey(b.db.url, new URL(link).pathname.split('/').pop()!);
    const ranges: [number, number][] = Array.from({ length: RANGES }, (_, i) => {
      const start = Math.floor((i * (size - MiB)) / (RANGES - 1));
      return [start, start + MiB - 1];
    });
    const specs = {
      [OURS]: { mode: 'http', url },
      [PROXY]: { mode: 'http', url: `${proxy.url}/${encodeURIComponent(key)}` },
      [DIRECT]: { mode: 's3', endpoint: b.s3.endpoint, bucket: 'dropstream', key },
    };

    for (const kind of ['whole', 'ranged'] as const) {
      const reps = b.reps ?? (b.quick ? 2 : 3);
      const expected = kind === 'whole' ? size : RANGES * MiB;
      const results = await alternate([OURS, PROXY, DIRECT], reps, async (label, rep) => {
        const spec = { ...specs[label], ...(kind === 'ranged' ? { ranges } : {}) };
        const pid = label === OURS ? server.proc.pid : label === PROXY ? proxy.proc.pid : undefined;
        const { result, watch: w } = await watch({ ...(pid ? { server: pid } : {}), s3rver: b.s3.s3rverPid }, () =>
          run<DownloadResult>({ name: 'download-client', args: [procScript('download-client'), JSON.stringify(spec)] }),
        );
        if (result.bytes !== expected) throw new Error(`${label} ${kind}: got ${result.bytes} bytes, expected ${expected} (statuses ${result.statuses})`);
        const s = {
          mb_s: mbPerSecond(result.bytes, result.wall),
          median_ms: round(median(result.latencies_ms), 1),
          server_peak_rss_mib: pid ? w.peakRssMib.server! : 0,
          server_cpu_pct: pid ? w.cpuPct.server! : 0,
          s3rver_cpu_pct: w.cpuPct.s3rver!,
          client_cpu_pct: round((result.cpu_s / result.wall) * 100, 0),
          machine_cpu_pct: w.machinePct,
        };
        log(`  ${kind} #${rep + 1} ${label}: ${s.mb_s} MB/s, median ${s.median_ms} ms, s3rver ${s.s3rver_cpu_pct}%`);
        return s;
      });
      const sides = [side(OURS, results[OURS]), side(PROXY, results[PROXY]), side(DIRECT, results[DIRECT])];
      const what = kind === 'whole' ? `${size / MiB} MiB whole` : `${RANGES} x 1 MiB ranges of ${size / MiB} MiB`;
      out.push({ scenario: 'downloads', case: what, reps, sides, ratios: {
          [`MB/s vs ${DIRECT}`]: ratio(sides[0]!.median.mb_s!, sides[2]!.median.mb_s!),
          [`MB/s vs ${PROXY}`]: ratio(sides[0]!.median.mb_s!, sides[1]!.median.mb_s!),
          [`${PROXY} MB/s vs ${DIRECT}`]: ratio(sides[1]!.median.mb_s!, sides[2]!.median.mb_s!),
        },
      });
    }
  } finally {
    await proxy.proc.stop();
    await server.proc.stop();
  }
  return out;
}
