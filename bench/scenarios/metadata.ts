// Scenario 4: the metadata endpoints with PostgreSQL and Redis behind them,
// under autocannon at 50 connections: GET /files/{id}, GET /files (a page of
// 20) and GET /stats, for three parties measured alternately in the same run:
//   - ours;
//   - the ceiling party (bench/procs/ceiling.ts): Koa + pg + ioredis doing
//     the same work per request with nothing else, on the same database,
//     Redis and account (the answers are checked to be the same JSON), in
//     two variants: the key's account and plan cached for a second, as ours
//     does (the target compares with this one), and looked up per request;
//   - a bare Koa handler answering the same URLs with the same JSON from
//     memory (the framework's limit).
// Then the list and the stats of an account holding 100,000 files (rows
// inserted by SQL; `dropstream gc` sets its counters), ours and the ceiling;
// and the SQL statements and Redis round trips per request, counted on a
// private PostgreSQL (bench/lib/roundtrips.ts). The accounts' plan allows
// 2^31-1 requests a minute, so no 429 distorts the numbers (the check below
// fails the run if any non-2xx answer was seen).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { newFileId } from '../../src/files/record.js';
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { admin, auth, REDIS_URL, type Dropstream } from '../lib/dropstream.js';
import { alternate, round, watch } from '../lib/measure.js';
import { cpuSecondsOf, run } from '../lib/proc.js';
import { dropstreamRoundTrips } from '../lib/roundtrips.js';
import { procScript, startBareKoa, startCeiling } from '../lib/servers.js';

const OURS = 'dropstream';
const CEILING = 'ceiling party, key cached 1 s';
const UNCACHED = 'ceiling party, key looked up per request';
const BARE = 'bare Koa, JSON from memory';
const CONNECTIONS = 50;
export const MANY_FILES = 100_000;

interface Cannon {
  requests: { average: number };
  latency: { p50: number; p99: number; average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  cpu_s: number;
  duration: number;
}

interface Target {
  url: string;
  headers: Record<string, string>;
  pid: number;
}

/** autocannon in a process of its own (bench/procs/load.ts). */
function cannon(url: string, seconds: number, headers: Record<string, string>): Promise<Cannon> {
  return run<Cannon>({ name: 'autocannon', args: [procScript('load'), JSON.stringify({ url, connections: CONNECTIONS, seconds, headers })] });
}

/** One case: every party in `targets` on `path`, alternately, `reps` times; ratios of ours against each other party. */
async function measure(b: Bench, log: (s: string) => void, label: string, path: string, targets: Record<string, Target>): Promise<Comparison> {
  const seconds = b.quick ? 5 : 10;
  const reps = b.reps ?? (b.quick ? 1 : 3);
  const parties = Object.keys(targets);
  // Warm-up (JIT, connection pools, caches), not measured.
  for (const t of Object.values(targets)) await cannon(`${t.url}${path}`, b.quick ? 1 : 2, t.headers);
  const results = await alternate(parties, reps, async (party, rep) => {
    const t = targets[party]!;
    const { result, watch: w } = await watch({ server: t.pid }, () => cannon(`${t.url}${path}`, seconds, t.headers), {
      postgres: () => cpuSecondsOf((cmd) => cmd.startsWith('postgres:') && cmd.includes(` ${b.db.name} `)),
      redis: () => cpuSecondsOf((cmd) => cmd.startsWith('redis-server')),
    });
    if (result.non2xx || result.errors || result.timeouts) {
      throw new Error(`${party} ${label}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
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
    log(`  ${label} #${rep + 1} ${party}: ${s.req_s} req/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms, cpu: server ${s.server_cpu_pct}%, postgres ${s.postgres_cpu_pct}%, redis ${s.redis_cpu_pct}%, autocannon ${s.autocannon_cpu_pct}%, machine ${s.machine_cpu_pct}%`);
    return s;
  });
  const sides = parties.map((p) => side(p, results[p]!));
  const ratios = Object.fromEntries(sides.slice(1).flatMap((s) => [
    [`req/s vs ${s.label}`, ratio(sides[0]!.median.req_s!, s.median.req_s!)],
    // Issue 41: the tail too, not only the mean rate.
    [`p99 vs ${s.label}`, ratio(sides[0]!.median.p99_ms!, s.median.p99_ms!)],
  ]));
  return { scenario: 'metadata', case: label, reps, sides, ratios };
}

/** GET `path` from both servers and fail the run unless the bodies are the same JSON. */
async function sameAnswers(ours: Target, ceiling: Target, path: string): Promise<unknown> {
  const [a, c] = await Promise.all([ours, ceiling].map(async (t) => {
    const res = await fetch(`${t.url}${path}`, { headers: t.headers });
    if (!res.ok) throw new Error(`GET ${path}: ${res.status}`);
    return res.text();
  }));
  if (a !== c) throw new Error(`the ceiling party answers GET ${path} differently:\n ours:    ${a!.slice(0, 300)}\n ceiling: ${c!.slice(0, 300)}`);
  return JSON.parse(a!);
}

/** An account with `count` files, inserted by SQL (no objects: the metadata endpoints never read them); `gc` sets its counters. */
async function accountWithFiles(b: Bench, server: Dropstream, count: number): Promise<string> {
  const created = await admin(server, 'POST', '/admin/accounts', { plan: 'bench' });
  const client = new pg.Client({ connectionString: b.db.url });
  await client.connect();
  try {
    const id = Number(created.account_id);
    // Ids are random, as the service draws them (src/files/file-rows.ts), and distinct.
    const ids = new Set<number>();
    while (ids.size < count) ids.add(newFileId());
    await client.query(
      `INSERT INTO files (id, account_id, filename, size, sha256, storage_key, link_token, download_count, created_at)
       SELECT file_id, ${id}, 'file-' || n || '.bin', 1000 + n, repeat('0', 64), 'many/${id}/' || n, 'many${id}x' || lpad(n::text, 12, '0'), 0,
              timestamp '2026-01-01' + n * interval '1 second'
       FROM unnest($1::integer[]) WITH ORDINALITY AS u(file_id, n)`,
      [[...ids]],
    );
    await client.query('VACUUM ANALYZE files');
  } finally {
    await client.end();
  }
  const gc = await admin(server, 'POST', '/admin/gc', {});
  if (gc.counters_fixed !== 1) throw new Error(`gc corrected ${String(gc.counters_fixed)} counters, expected the new account's`);
  return String(created.api_key);
}

export async function metadata(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const server = await startOurs(b, 'metadata', 's3');
  let bare: Awaited<ReturnType<typeof startBareKoa>> | undefined;
  let ceiling: Awaited<ReturnType<typeof startCeiling>> | undefined;
  let uncached: Awaited<ReturnType<typeof startCeiling>> | undefined;
  const out: Comparison[] = [];
  try {
    // 24 small files at once, so the list is a full page of 20: one account holds at
    // most 24 of an instance's 32 upload slots (UPLOAD_CONCURRENCY); a 25th was 503 server_busy.
    const seeded = await run<{ uploads: { body: string }[] }>({
      name: 'upload-client',
      args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${server.url}/api/v1/files/upload`, headers: auth(server), size: 1024, count: 24 })],
    });
    const first = seeded.uploads.map((u) => JSON.parse(u.body) as { file_id: number; public_link: string }).sort((x, y) => x.file_id - y.file_id)[0]!;
    const publicUrl = first.public_link.slice(0, first.public_link.indexOf('/download/'));
    const ceilingSpec = { databaseUrl: b.db.url, redisUrl: REDIS_URL, keyPrefix: `${b.redisKeyPrefix}-ceiling`, publicUrl };
    ceiling = await startCeiling({ ...ceilingSpec, keyCacheMs: 1000 });
    uncached = await startCeiling(ceilingSpec);
    const ours: Target = { url: server.url, headers: auth(server), pid: server.proc.pid };
    const top: Target = { url: ceiling.url, headers: auth(server), pid: ceiling.proc.pid };
    const plain: Target = { url: uncached.url, headers: auth(server), pid: uncached.proc.pid };
    const cases: [string, string][] = [
      ['GET /api/v1/files/{id}', `/api/v1/files/${first.file_id}`],
      ['GET /api/v1/files', '/api/v1/files'],
      ['GET /api/v1/stats', '/api/v1/stats'],
    ];
    const responses: Record<string, unknown> = {};
    for (const [, path] of cases) {
      responses[path] = await sameAnswers(ours, top, path);
      await sameAnswers(ours, plain, path);
    }
    const responsesFile = join(b.workDir, 'metadata-responses.json');
    await writeFile(responsesFile, JSON.stringify(responses));
    bare = await startBareKoa(responsesFile);
    const flat: Target = { url: bare.url, headers: {}, pid: bare.proc.pid };
    for (const [label, path] of cases) out.push(await measure(b, log, label, path, { [OURS]: ours, [CEILING]: top, [UNCACHED]: plain, [BARE]: flat }));

    log(`  seeding an account with ${MANY_FILES.toLocaleString('en')} files`);
    const manyKey = await accountWithFiles(b, server, MANY_FILES);
    const many = { ours: { ...ours, headers: { Authorization: `Bearer ${manyKey}` } }, top: { ...top, headers: { Authorization: `Bearer ${manyKey}` } } };
    const lastPage = Math.ceil(MANY_FILES / 20);
    const manyCases: [string, string][] = [
      [`GET /api/v1/files (${MANY_FILES.toLocaleString('en')} files)`, '/api/v1/files'],
      [`GET /api/v1/stats (${MANY_FILES.toLocaleString('en')} files)`, '/api/v1/stats'],
      [`GET /api/v1/files?page=${lastPage} (${MANY_FILES.toLocaleString('en')} files, the last page)`, `/api/v1/files?page=${lastPage}`],
    ];
    for (const [label, path] of manyCases) {
      await sameAnswers(many.ours, many.top, path);
      out.push(await measure(b, log, label, path, { [OURS]: many.ours, [CEILING]: many.top }));
    }
  } finally {
    await Promise.all([server.proc.stop(), bare?.proc.stop(), ceiling?.proc.stop(), uncached?.proc.stop()]);
  }

  log('  counting SQL statements and Redis round trips per request (private PostgreSQL with pg_stat_statements)');
  const counted = await dropstreamRoundTrips({
    redisUrl: REDIS_URL,
    redisKeyPrefix: `${b.redisKeyPrefix}-rt`,
    workDir: join(b.workDir, 'roundtrips'),
    ceiling: (databaseUrl, publicUrl) => startCeiling({ databaseUrl, redisUrl: REDIS_URL, keyPrefix: `${b.redisKeyPrefix}-rt`, publicUrl, keyCacheMs: 1000 }),
  });
  for (const c of counted) {
    const sides = [side(OURS, [{ sql_per_request: c.sql, redis_per_request: c.redis }])];
    if (c.ceiling) sides.push(side(CEILING, [{ sql_per_request: c.ceiling.sql, redis_per_request: c.ceiling.redis }]));
    const detail = (who: string, d: typeof c) => [
      ...Object.entries(d.sqlStatements).map(([q, n]) => `${who}: SQL ${n} x \`${q}\``),
      ...Object.entries(d.redisCommands).map(([q, n]) => `${who}: Redis ${n} x ${q}`),
    ];
    out.push({ scenario: 'roundtrips', case: c.case, reps: c.requests, sides, ratios: {}, notes: [...detail('ours', c), ...(c.ceiling ? detail('ceiling', c.ceiling) : [])] });
  }
  return out;
}
