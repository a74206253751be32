// The noisy-neighbour case of the concurrency scenario: another account's
// small-upload latency (p50, p99) while one account holds its maximum of
// stalled uploads (the plan's concurrent_uploads), against the same uploads
// on an idle server. Target: within 1.2x (issue 20).
import { request, type ClientRequest } from 'node:http';
import { admin, auth, type Dropstream } from '../lib/dropstream.js';
import { ratio, side, type Comparison } from '../lib/context.js';
import { round } from '../lib/measure.js';

const BOUNDARY = 'noisyneighbourboundary';
const TYPE = `multipart/form-data; boundary=${BOUNDARY}`;
const HEAD = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\n\r\n`;
const SLOTS = 8;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** `count` uploads of 64 KiB one after another; their latencies in ms. */
async function latencies(server: Dropstream, count: number): Promise<number[]> {
  const body = Buffer.concat([Buffer.from(HEAD), Buffer.alloc(64 * 1024, 7), Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]);
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const res = await fetch(`${server.url}/api/v1/files/upload`, { method: 'POST', headers: { ...auth(server), 'Content-Type': TYPE }, body });
    await res.arrayBuffer();
    if (res.status !== 201) throw new Error(`neighbour upload answered ${res.status}`);
    out.push(performance.now() - started);
  }
  return out;
}

/** An upload that sends its head and then 2 KiB a second: held, never finished (and fast enough not to be cut). */
function stalled(server: Dropstream, key: string): { req: ClientRequest; stop: () => void } {
  const req = request(`${server.url}/api/v1/files/upload`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': TYPE } });
  req.on('error', () => {});
  req.write(HEAD);
  const trickle = setInterval(() => req.write(Buffer.alloc(2048)), 1000);
  return { req, stop: () => (clearInterval(trickle), req.destroy()) };
}

export async function noisyNeighbour(server: Dropstream, quick: boolean, log: (s: string) => void): Promise<Comparison> {
  const count = quick ? 20 : 100;
  await admin(server, 'PUT', '/admin/plans/noisy', { api_access: true, requests_per_minute: 100_000, requests_per_day: 100_000, max_file_size: 1 << 30, daily_uploads: 100_000, concurrent_uploads: SLOTS });
  const noisyKey = String((await admin(server, 'POST', '/admin/accounts', { plan: 'noisy' })).api_key);
  await latencies(server, 5); // warm-up
  const idle = await latencies(server, count);
  const held = Array.from({ length: SLOTS }, () => stalled(server, noisyKey));
  let noisy: number[];
  try {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // One over the limit must be refused with 429, or the case measures nothing.
    const extra = await fetch(`${server.url}/api/v1/files/upload`, { method: 'POST', headers: { Authorization: `Bearer ${noisyKey}`, 'Content-Type': TYPE }, body: `${HEAD}x\r\n--${BOUNDARY}--\r\n` });
    await extra.arrayBuffer();
    if (extra.status !== 429) throw new Error(`the noisy account's extra upload answered ${extra.status}, not 429`);
    noisy = await latencies(server, count);
  } finally {
    for (const h of held) h.stop();
  }
  const summary = (ms: number[]) => ({ p50_ms: round(percentile(ms, 50), 1), p99_ms: round(percentile(ms, 99), 1) });
  const sides = [side('idle server', [summary(idle)]), side(`${SLOTS} stalled uploads of another account`, [summary(noisy)])];
  log(`  noisy neighbour: idle p50 ${sides[0]!.median.p50_ms} ms p99 ${sides[0]!.median.p99_ms} ms; noisy p50 ${sides[1]!.median.p50_ms} ms p99 ${sides[1]!.median.p99_ms} ms`);
  return {
    scenario: 'concurrency',
    case: `noisy neighbour, ${count} x 64 KiB`,
    reps: 1,
    sides,
    ratios: { 'p50 noisy/idle': ratio(sides[1]!.median.p50_ms!, sides[0]!.median.p50_ms!), 'p99 noisy/idle': ratio(sides[1]!.median.p99_ms!, sides[0]!.median.p99_ms!) },
    notes: ['target: within 1.2x'],
  };
}
