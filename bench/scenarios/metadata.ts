// Scenario 4: the metadata endpoints with PostgreSQL and Redis behind them,
// under autocannon at 50 connections: GET /files/{id}, GET /files (a page of
// 20) and GET /stats, against a bare Koa handler answering the same URLs
// with the same JSON from memory (the framework's limit). The account's plan
// allows 2^31-1 requests a minute, so no 429 distorts the numbers (the check
// below fails the run if any non-2xx answer was seen).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { auth } from '../lib/dropstream.js';
import { alternate, round, watch } from '../lib/measure.js';
import { cpuSecondsOf, run } from '../lib/proc.js';
import { procScript, startBareKoa } from '../lib/servers.js';

const OURS = 'dropstream';
const BARE = 'bare Koa, JSON from memory';
const CONNECTIONS = 50;

interface Cannon {
  requests: { average: number };
  latency: { p50: number; p99: number; average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  cpu_s: number;
  duration: number;
}

/** autocannon in a process of its own (bench/procs/load.ts). */
function cannon(url: string, seconds: number, headers: Record<string, string>): Promise<Cannon> {
  return run<Cannon>({ name: 'autocannon', args: [procScript('load'), JSON.stringify({ url, connections: CONNECTIONS, seconds, headers })] });
}

export async function metadata(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const seconds = b.quick ? 5 : 10;
  const server = await startOurs(b, 'metadata', 's3');
  let bare: Awaited<ReturnType<typeof startBareKoa>> | undefined;
  const out: Comparison[] = [];
  try {
    // 25 small files, so the list is a full page of 20.
    const seeded = await run<{ uploads: { body: string }[] }>({
      name: 'upload-client',
      args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${server.url}/api/v1/files/upload`, headers: auth(server), size: 1024, count: 25 })],
    });
    const fileId = Math.min(...seeded.uploads.map((u) => JSON.parse(u.body).file_id as number));
    const paths = [`/api/v1/files/${fileId}`, '/api/v1/files', '/api/v1/stats'];
    const responses: Record<string, unknown> = {};
    for (const path of paths) {
      const res = await fetch(`${server.url}${path}`, { headers: auth(server) });
      if (!res.ok) throw new Error(`GET ${path}: ${res.status}`);
      responses[path] = await res.json();
    }
    const responsesFile = join(b.workDir, 'metadata-responses.json');
    await writeFile(responsesFile, JSON.stringify(responses));
    bare = await startBareKoa(responsesFile);
    const targets = { [OURS]: { url: server.url, headers: auth(server), pid: server.proc.pid }, [BARE]: { url: bare.url, headers: {}, pid: bare.proc.pid } };

    for (const path of paths) {
      // Warm-up (JIT, connection pools), not measured.
      for (const t of Object.values(targets)) await cannon(`${t.url}${path}`, b.quick ? 1 : 2, t.headers);
      const reps = b.reps ?? (b.quick ? 1 : 3);
      const results = await alternate([OURS, BARE], reps, async (label, rep) => {
        const t = targets[label];
        const { result, watch: w } = await watch({ server: t.pid }, () => cannon(`${t.url}${path}`, seconds, t.headers), {
          postgres: () => cpuSecondsOf((cmd) => cmd.startsWith('postgres:') && cmd.includes(` ${b.db.name} `)),
          redis: () => cpuSecondsOf((cmd) => cmd.startsWith('redis-server')),
        });
        if (result.non2xx || result.errors || result.timeouts) {
          throw new Error(`${label} ${path}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
        }
        const s = {
          req_s: Math.round(result.requests.average),
          p50_ms: result.latency.p50,
          p99_ms: result.latency.p99,
          server_cpu_pct: w.cpuPct.server!,
          postgres_cpu_pct: w.cpuPct.postgres!,
          redis_cpu_pct: w.cpuPct.redis!,
          autocannon_cpu_pct: round((result.cpu_s / result.duration) * 100, 0),
          machine_cpu_pct: w.machinePct,
          server_peak_rss_mib: w.peakRssMib.server!,
        };
        log(`  GET ${path} #${rep + 1} ${label}: ${s.req_s} req/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms, cpu: server ${s.server_cpu_pct}%, postgres ${s.postgres_cpu_pct}%, redis ${s.redis_cpu_pct}%, autocannon ${s.autocannon_cpu_pct}%, machine ${s.machine_cpu_pct}%`);
        return s;
      });
      const sides = [side(OURS, results[OURS]), side(BARE, results[BARE])];
      out.push({
        scenario: 'metadata',
        case: `GET ${path.replace(String(fileId), '{id}')}`,
        reps,
        sides,
        ratios: { [`req/s vs ${BARE}`]: ratio(sides[0]!.median.req_s!, sides[1]!.median.req_s!) },
      });
    }
  } finally {
    await Promise.all([server.proc.stop(), bare?.proc.stop()]);
  }
  return out;
}
