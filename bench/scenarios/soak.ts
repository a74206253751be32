// Scenario: a short soak. Our server on S3 takes mixed load for a few
// minutes (plain and resumable uploads of 1-48 MiB, whole downloads of what
// was uploaded, metadata requests at 16 connections), then rests; we compare
// its resident memory at rest before and after. Memory that does not come
// back after load (caches that only grow, pooled buffers kept, glibc heaps
// not trimmed) shows here and nowhere else. Every upload must be accepted
// and every download complete: a soak that errors measures nothing.
//
// Idle is VmRSS after SETTLE seconds without requests; "before" is taken
// twice: right after start, and after a warm-up of one request of each kind
// (the modules they load on first use are then in both figures).
import { readFile, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { auth, type Dropstream } from '../lib/dropstream.js';
import { mib, round } from '../lib/measure.js';
import { currentRss, MiB, peakRss, resetPeakRss, run } from '../lib/proc.js';
import { procScript } from '../lib/servers.js';
import { accepted, client } from '../lib/uploads.js';

const SETTLE_S = 30;

/** V8's heap and external memory, MiB, from the admin listener's /metrics. */
async function v8Memory(server: Dropstream): Promise<Record<string, number>> {
  const text = await (await fetch(`${server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${server.adminToken}` } })).text();
  const metric = (name: string) => {
    const m = new RegExp(`^\\w*${name}\\s+([0-9.e+]+)`, 'm').exec(text);
    return m ? mib(Number(m[1])) : NaN;
  };
  return { heap_used_mib: metric('nodejs_heap_size_used_bytes'), heap_total_mib: metric('nodejs_heap_size_total_bytes'), external_mib: metric('nodejs_external_memory_bytes') };
}

async function idle(server: Dropstream): Promise<number> {
  await sleep(SETTLE_S * 1000);
  return mib(await currentRss(server.proc.pid));
}

export async function soak(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const seconds = b.quick ? 30 : 180;
  const server = await startOurs(b, 'soak', 's3');
  const headers = auth(server);
  const links: string[] = [];
  const counts = { uploads: 0, resumable: 0, downloads: 0, metadata: 0 };
  let uploadedBytes = 0;

  const upload = async (mode: 'multipart' | 'tus', size: number) => {
    const res = await client(
      mode === 'multipart'
        ? { mode, url: `${server.url}/api/v1/files/upload`, headers, size, count: 1 }
        : { mode, url: `${server.url}/api/v1/uploads`, headers, size, count: 1, chunk: 8 * MiB },
    );
    accepted(res, `soak ${mode} upload`);
    const body = JSON.parse(res.uploads.at(-1)!.body || '{}') as { public_link?: string };
    if (body.public_link) links.push(`${server.url}${new URL(body.public_link).pathname}`);
    uploadedBytes += size;
  };
  const download = async (url: string) => {
    const got = await run<{ bytes: number }>({ name: 'download-client', args: [procScript('download-client'), JSON.stringify({ mode: 'http', url })] });
    if (!(got.bytes > 0)) throw new Error(`soak download of ${url} read ${got.bytes} bytes`);
  };
  const metadata = (path: string, secs: number) =>
    run<{ requests: { total: number }; non2xx: number; errors: number }>({
      name: 'autocannon',
      args: [procScript('load'), JSON.stringify({ url: `${server.url}${path}`, connections: 16, seconds: secs, headers })],
    }).then((r) => {
      if (r.non2xx || r.errors) throw new Error(`soak ${path}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
      counts.metadata += r.requests.total;
    });

  try {
    const atStart = mib(await currentRss(server.proc.pid));
    const startIdle = await idle(server);
    // Warm-up: one request of each kind.
    await upload('multipart', 2 * MiB);
    await upload('tus', 9 * MiB);
    await download(links[0]!);
    await metadata('/api/v1/stats', 1);
    const warmIdle = await idle(server);
    const before = await v8Memory(server);
    log(`  soak: idle ${startIdle} MiB after start, ${warmIdle} MiB after a warm-up (heap ${before.heap_used_mib}/${before.heap_total_mib}, external ${before.external_mib})`);

    await resetPeakRss(server.proc.pid);
    const until = Date.now() + seconds * 1000;
    const sizes = [1, 3, 8, 17, 33, 48].map((m) => m * MiB);
    let n = 0;
    const loop = async (step: () => Promise<void>) => {
      while (Date.now() < until) await step();
    };
    await Promise.all([
      loop(async () => {
        await upload('multipart', sizes[n++ % sizes.length]!);
        counts.uploads += 1;
      }),
      loop(async () => {
        await upload('multipart', sizes[(n + 3) % sizes.length]!);
        counts.uploads += 1;
      }),
      loop(async () => {
        await upload('tus', sizes[(n + 1) % sizes.length]!);
        counts.resumable += 1;
      }),
      loop(async () => {
        await download(links[Math.floor(Math.random() * links.length)]!);
        counts.downloads += 1;
      }),
      loop(async () => {
        for (const path of ['/api/v1/files', '/api/v1/stats', '/api/v1/files?page=2']) await metadata(path, 5);
      }),
    ]);
    const peak = mib(await peakRss(server.proc.pid));
    const afterIdle = await idle(server);
    const after = await v8Memory(server);
    log(
      `  soak ${seconds} s: ${counts.uploads} uploads, ${counts.resumable} resumable, ${counts.downloads} downloads, ${counts.metadata} metadata requests; ` +
        `peak ${peak} MiB, idle after ${afterIdle} MiB (heap ${after.heap_used_mib}/${after.heap_total_mib}, external ${after.external_mib})`,
    );
    // SOAK_SMAPS=FILE keeps the server's memory map at rest after the soak (which mappings hold it).
    if (process.env.SOAK_SMAPS) await writeFile(process.env.SOAK_SMAPS, await readFile(`/proc/${server.proc.pid}/smaps`));
    // BENCH_SERVER_NODE_OPTIONS=--heapsnapshot-signal=SIGUSR2: a heap snapshot
    // (which collects everything first) tells garbage from memory still held.
    if (process.env.BENCH_SERVER_NODE_OPTIONS?.includes('--heapsnapshot-signal=SIGUSR2')) {
      process.kill(server.proc.pid, 'SIGUSR2');
      const gcIdle = await idle(server);
      const gc = await v8Memory(server);
      log(`  after a heap snapshot (a full collection): ${gcIdle} MiB (heap ${gc.heap_used_mib}/${gc.heap_total_mib}, external ${gc.external_mib}); the snapshot is in the server's working folder`);
    }
    const sample = {
      soak_s: seconds,
      rss_at_start_mib: atStart,
      idle_after_start_mib: startIdle,
      idle_after_warmup_mib: warmIdle,
      peak_rss_mib: peak,
      idle_after_soak_mib: afterIdle,
      heap_used_after_mib: after.heap_used_mib!,
      external_after_mib: after.external_mib!,
      uploads: counts.uploads + counts.resumable,
      downloads: counts.downloads,
      metadata_requests: counts.metadata,
      uploaded_mib: round(uploadedBytes / MiB, 0),
    };
    return [
      {
        scenario: 'soak',
        case: `${seconds} s of mixed load (S3)`,
        reps: 1,
        sides: [side('dropstream', [sample])],
        ratios: { 'idle after / after start': round(afterIdle / startIdle, 2), 'idle after / after warm-up': round(afterIdle / warmIdle, 2) },
      },
    ];
  } finally {
    await server.proc.stop();
  }
}
