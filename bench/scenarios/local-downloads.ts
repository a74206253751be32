// Downloads from the local store (the embedded default's disk path): one
// object our service stored, through our public link, against the fair
// limit, a bare node:http server piping fs.createReadStream of the same file
// to the response (bench/procs/file-download-server.ts).
//   whole:  the object at once (1 GiB; 64 MiB with --quick);
//   ranged: 64 requests of 1 MiB at offsets spread over the object, one
//           after another on one kept-alive connection.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { ratio, side, type Bench, type Comparison } from '../lib/context.js';
import { auth, startDropstream } from '../lib/dropstream.js';
import { alternate, mbPerSecond, median, round, watch } from '../lib/measure.js';
import { MiB, run } from '../lib/proc.js';
import { procScript, startFileDownload } from '../lib/servers.js';

const OURS = 'dropstream /download (local)';
export const BARE = 'node:http + fs.createReadStream';
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

export async function localDownloads(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const size = (b.quick ? 64 : 1024) * MiB;
  const dataDir = join(b.workDir, 'dropstream-local-downloads');
  await mkdir(dataDir, { recursive: true });
  const server = await startDropstream({
    name: 'dropstream-local-downloads',
    databaseUrl: b.db.url,
    dataDir,
    redisKeyPrefix: b.redisKeyPrefix,
    nodeFlags: b.serverFlags('local-downloads'),
    env: b.serverEnv,
  });
  const bare = await startFileDownload(join(dataDir, 'objects'));
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
    const urls = { [OURS]: url, [BARE]: `${bare.url}/${key.split('/').map(encodeURIComponent).join('/')}` };
    const pids = { [OURS]: server.proc.pid, [BARE]: bare.proc.pid };
    for (const kind of ['whole', 'ranged'] as const) {
      const reps = b.reps ?? (b.quick ? 2 : 3);
      const expected = kind === 'whole' ? size : RANGES * MiB;
      const results = await alternate([OURS, BARE], reps, async (label, rep) => {
        const spec = { mode: 'http', url: urls[label], ...(kind === 'ranged' ? { ranges } : {}) };
        const { result, watch: w } = await watch({ server: pids[label]! }, () =>
          run<DownloadResult>({ name: 'download-client', args: [procScript('download-client'), JSON.stringify(spec)] }),
        );
        if (result.bytes !== expected) throw new Error(`${label} ${kind}: got ${result.bytes} bytes, expected ${expected} (statuses ${result.statuses})`);
        const s = {
          mb_s: mbPerSecond(result.bytes, result.wall),
          median_ms: round(median(result.latencies_ms), 1),
          server_peak_rss_mib: w.peakRssMib.server!,
          server_cpu_pct: w.cpuPct.server!,
          client_cpu_pct: round((result.cpu_s / result.wall) * 100, 0),
          machine_cpu_pct: w.machinePct,
        };
        log(`  local ${kind} #${rep + 1} ${label}: ${s.mb_s} MB/s, median ${s.median_ms} ms, server cpu ${s.server_cpu_pct}%`);
        return s;
      });
      const sides = [side(OURS, results[OURS]), side(BARE, results[BARE])];
      const what = kind === 'whole' ? `local, ${size / MiB} MiB whole` : `local, ${RANGES} x 1 MiB ranges of ${size / MiB} MiB`;
      out.push({ scenario: 'downloads', case: what, reps, sides, ratios: { [`MB/s vs ${BARE}`]: ratio(sides[0]!.median.mb_s!, sides[1]!.median.mb_s!) } });
    }
  } finally {
    await Promise.all([bare.proc.stop(), server.proc.stop()]);
  }
  return out;
}
