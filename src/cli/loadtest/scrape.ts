// The server's side of a load test: /metrics on the admin listener, scraped
// once a second, for the RSS, uploads in flight and store errors.
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError } from '../cli-error.js';
import { apiUrl } from '../transfer-http.js';
import type { ServerPoint } from './recorder.js';

/** The metric names the report plots (src/metrics.ts; the process ones are prom-client's defaults with our prefix). */
export const SCRAPED = {
  rssBytes: 'dropstream_process_resident_memory_bytes',
  uploadsInFlight: 'dropstream_uploads_in_flight',
  resumableInFlight: 'dropstream_resumable_uploads_in_flight',
  partBuffers: 'dropstream_part_buffers_in_use',
  storeErrors: 'dropstream_store_errors_total',
} as const;

/** Sums each wanted metric over its label sets. */
export function parseMetrics(text: string): Omit<ServerPoint, 't'> {
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[3]);
    if (Number.isFinite(value)) sums.set(match[1]!, (sums.get(match[1]!) ?? 0) + value);
  }
  const point: Omit<ServerPoint, 't'> = {};
  for (const [field, name] of Object.entries(SCRAPED) as [keyof typeof SCRAPED, string][]) {
    if (sums.has(name)) point[field] = sums.get(name);
  }
  return point;
}

export async function scrape(adminUrl: URL, token: string): Promise<Omit<ServerPoint, 't'>> {
  // fetch rather than readBody: the exposition is larger than an error body's cap.
  const url = apiUrl(adminUrl, '/metrics');
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new CliError(`${url.href} answered ${res.status}`);
  return parseMetrics(await res.text());
}

/** Scrapes every `intervalMs` until stopped; a failed scrape leaves a gap, not an error. */
export function startScraping(adminUrl: URL, token: string, onPoint: (point: Omit<ServerPoint, 't'>) => void, intervalMs = 1000): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await scrape(adminUrl, token).then(onPoint, () => {});
      if (!stopped) await sleep(intervalMs);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}
