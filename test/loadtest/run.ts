// Shared by the loadtest suites: a server to load (embedded default, or
// PostgreSQL + Redis + S3), a run of `dropstream loadtest` in this process,
// and what the server itself counted (/metrics) and stores (/stats, file list).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadtest } from '../../src/cli/loadtest/index.js';
import { backends, servicesOnly } from '../helpers/databases.js';
import { freshPrefix, redisUrl } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestS3, type TestS3 } from '../helpers/test-s3.js';

export interface Setup {
  name: string;
  start(): Promise<{ t: TestServer; close(): Promise<void> }>;
}

export const setups: Setup[] = [];
// (In CI's services stage the embedded half is left to its run without services.)
if (!servicesOnly) {
  setups.push({
    name: 'embedded default (PGlite, local store)',
    async start() {
      const t = await startTestServer('pglite');
      return { t, close: () => t.close() };
    },
  });
}
if (backends.includes('postgresql') && redisUrl) {
  setups.push({
    name: 'PostgreSQL + Redis + S3',
    async start() {
      const s3: TestS3 = await startTestS3();
      const t = await startTestServer('postgresql', { ...s3.env(s3.bucket('loadtest')), REDIS_URL: redisUrl!, REDIS_KEY_PREFIX: freshPrefix() });
      return {
        t,
        async close() {
          await t.close();
          await s3.close();
        },
      };
    },
  });
}

/**
 * Runs the loadtest against `t` with `key` (none: --setup, the default with
 * admin access); resolves with its exit code, JSON summary and what it printed.
 */
export async function runLoadtest(t: TestServer, key: string | undefined, args: string[]): Promise<{ code: number; summary: any; dir: string; stdout: string; stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'dropstream-loadtest-'));
  const printed = { stdout: '', stderr: '' };
  const code = await loadtest(
    [...args, '--server', t.server.url, ...(key === undefined ? [] : ['--key', key]), '--admin-url', t.server.adminUrl, '--admin-token', t.server.adminToken, '--json', join(dir, 'summary.json'), '--report', join(dir, 'report.html')],
    {},
    { stdout: { write: (text: string) => (printed.stdout += text) }, stderr: { write: (text: string) => (printed.stderr += text) } },
  );
  const summary = JSON.parse(await readFile(join(dir, 'summary.json'), 'utf8'));
  return { code, summary, dir, ...printed };
}

export const removeDir = (dir: string) => rm(dir, { recursive: true, force: true });

/** dropstream_http_requests_total by "METHOD route status". */
export async function serverRequests(t: TestServer): Promise<Map<string, number>> {
  const res = await fetch(`${t.server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${t.server.adminToken}` } });
  const counts = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    const m = /^dropstream_http_requests_total\{route="([^"]*)",method="([^"]*)",status="([^"]*)"\} (\S+)/.exec(line);
    if (m) counts.set(`${m[2]} ${m[1]} ${m[3]}`, Number(m[4]));
  }
  return counts;
}

/** The loadtest's request kinds, as the server's route labels name them (synthetic kinds are not requests). */
const ROUTES: Record<string, string | null> = {
  upload: 'POST /api/v1/files/upload',
  'setup upload': 'POST /api/v1/files/upload',
  'slow upload': 'POST /api/v1/files/upload',
  'cleanup delete': 'DELETE /api/v1/files/:id',
  download: 'GET /download/:token',
  range: 'GET /download/:token',
  'slow download': 'GET /download/:token',
  list: 'GET /api/v1/files',
  stats: 'GET /api/v1/stats',
  info: 'GET /api/v1/files/:id',
  'tus POST': 'POST /api/v1/uploads',
  'tus HEAD': 'HEAD /api/v1/uploads/:id',
  'tus PATCH': 'PATCH /api/v1/uploads/:id',
  'tus GET': 'GET /api/v1/uploads/:id',
  resumable: null,
  'tus failed': null,
  'direct offer': 'GET /api/v1/uploads/direct',
  'direct create': 'POST /api/v1/uploads/direct',
  'direct parts': 'POST /api/v1/uploads/direct/:id/parts',
  'direct complete': 'POST /api/v1/uploads/direct/:id/complete',
  // Straight to the store: the server never sees them.
  'direct PUT': null,
  direct: null,
};

const LOST = ['none', 'abandoned', 'cut'];

/**
 * The answers the summary counted, as "METHOD route status" -> count, and per
 * route the requests the client never saw answered (no answer, abandoned, cut):
 * the server may have answered and counted those.
 */
export function summaryRequests(summary: any): { counts: Map<string, number>; lost: Map<string, number> } {
  const counts = new Map<string, number>();
  const lost = new Map<string, number>();
  // The cleanup's DELETEs are not part of the load, but the server counted them.
  const kinds = { ...summary.kinds, ...(Object.keys(summary.cleanup.statuses).length ? { 'cleanup delete': { statuses: summary.cleanup.statuses } } : {}) };
  for (const [kind, totals] of Object.entries(kinds as Record<string, { statuses: Record<string, number> }>)) {
    const route = ROUTES[kind];
    if (route === undefined) throw new Error(`the test does not know the request kind ${kind}`);
    if (route === null) continue;
    for (const [status, n] of Object.entries(totals.statuses)) {
      if (LOST.includes(status)) {
        lost.set(route, (lost.get(route) ?? 0) + n);
        continue;
      }
      const key = `${route} ${status}`;
      counts.set(key, (counts.get(key) ?? 0) + n);
    }
  }
  return { counts, lost };
}

/** True when the server counted what the summary says, plus at most the lost requests of each route. */
export function matches(seen: Map<string, number>, { counts, lost }: ReturnType<typeof summaryRequests>): boolean {
  const excess = new Map<string, number>();
  for (const key of new Set([...seen.keys(), ...counts.keys()])) {
    const d = (seen.get(key) ?? 0) - (counts.get(key) ?? 0);
    if (d < 0) return false;
    const route = key.split(' ').slice(0, 2).join(' ');
    excess.set(route, (excess.get(route) ?? 0) + d);
  }
  return [...excess].every(([route, d]) => d <= (lost.get(route) ?? 0));
}

/** What the server counted between two scrapes, without the 499s (requests the client gave up, which it never saw answered). */
export function delta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, n] of after) {
    const d = n - (before.get(key) ?? 0);
    if (d > 0 && !key.endsWith(' 499') && / \/(api|download)\//.test(key)) out.set(key, d);
  }
  return out;
}

export const sorted = (m: Map<string, number>) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)));

/** The account as the API shows it: /stats and the file list. */
export async function accountState(t: TestServer, key: string) {
  const headers = { Authorization: `Bearer ${key}` };
  const stats: any = await (await fetch(`${t.server.url}/api/v1/stats`, { headers })).json();
  const list: any = await (await fetch(`${t.server.url}/api/v1/files?limit=100`, { headers })).json();
  return { stats: stats.stats, files: list.files.map((f: any) => f.file_id), total: list.pagination.total };
}
