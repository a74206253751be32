// Round trips per request, counted where they land: SQL statements by
// pg_stat_statements on a PostgreSQL cluster of our own (the extension must
// be preloaded, which the machine's shared server is not; top-level
// statements only, so a foreign-key check inside an INSERT is not counted),
// Redis commands by MONITOR on the shared Redis (the connections that send
// commands carrying our key prefix are ours; commands a Lua script runs
// inside Redis are not counted), and Redis round trips by the read events
// Redis processed meanwhile (INFO stats, total_reads_processed): commands
// sent in one write (a pipeline, a MULTI ... EXEC block) are one read, and a
// command sent after another's reply is another. Nothing else may use the
// Redis while a case is counted. Requests go one at a time, so nothing is batched across
// requests; under load Prisma batches concurrent findUnique calls and the
// SQL count per request can only be lower.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createPrivatePostgres, type PrivatePostgres } from '../../test/helpers/private-postgres.js';

export interface RoundTripCase {
  /** e.g. "GET /api/v1/files/{id}" */
  name: string;
  requests: number;
  /** Sends request number `i`; throws unless it got the expected answer. */
  send(i: number): Promise<void>;
}

export interface RoundTripCount {
  case: string;
  requests: number;
  /** SQL statements per request (BEGIN and COMMIT count: each is a round trip). */
  sql: number;
  /** Redis round trips per request (commands in one write, as a pipeline or MULTI ... EXEC block, are one). */
  redis: number;
  /** Per request, by normalised statement text (shortened). */
  sqlStatements: Record<string, number>;
  /** Per request, by command name. */
  redisCommands: Record<string, number>;
  /** The same case on the ceiling party, when it was counted too. */
  ceiling?: RoundTripCount;
}

const per = (total: number, requests: number) => Math.round((total / requests) * 100) / 100;
const shorten = (query: string) => {
  const flat = query.replace(/"public"\./g, '').replace(/\s+/g, ' ').trim();
  return flat.length > 90 ? `${flat.slice(0, 87)}...` : flat;
};

export class RoundTripCounter {
  /** Commands from clients (not Lua), with their connection. */
  private redisSeen: { source: string; args: string[] }[] = [];

  private constructor(
    private readonly cluster: PrivatePostgres,
    private readonly admin: pg.Client,
    private readonly dbOid: number,
    private readonly monitor: Redis,
    /** Reads INFO stats; its own INFO calls are taken off the count. */
    private readonly stats: Redis,
    private readonly prefix: string,
    /** Database the measured servers use. */
    readonly databaseUrl: string,
  ) {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source !== 'lua') this.redisSeen.push({ source, args });
    });
  }

  /** A private cluster with pg_stat_statements and a database `bench` in it; MONITOR on `redisUrl` for keys under `prefix`. */
  static async start(redisUrl: string, prefix: string): Promise<RoundTripCounter> {
    const cluster = createPrivatePostgres({ shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'top' });
    try {
      const admin = new pg.Client({ connectionString: cluster.url });
      await admin.connect();
      await admin.query('CREATE DATABASE bench');
      await admin.query('CREATE EXTENSION pg_stat_statements');
      const oid = (await admin.query<{ oid: number }>("SELECT oid FROM pg_database WHERE datname = 'bench'")).rows[0]!.oid;
      // monitor() opens a connection of its own; the one it came from is not needed.
      const base = new Redis(redisUrl, { lazyConnect: true });
      const monitor = await base.monitor();
      base.disconnect();
      const stats = new Redis(redisUrl);
      return new RoundTripCounter(cluster, admin, oid, monitor, stats, prefix, cluster.url.replace(/\/postgres$/, '/bench'));
    } catch (err) {
      cluster.destroy();
      throw err;
    }
  }

  async count(c: RoundTripCase): Promise<RoundTripCount> {
    await this.admin.query('SELECT pg_stat_statements_reset()');
    this.redisSeen = [];
    const readsBefore = await this.redisReads();
    for (let i = 0; i < c.requests; i++) await c.send(i);
    // Work after the response (download counts, refunds) and the statistics collector.
    await sleep(500);
    // Less the INFO that read the count after.
    const reads = (await this.redisReads()) - readsBefore - 1;
    const rows = (
      await this.admin.query<{ query: string; calls: string }>('SELECT query, calls FROM pg_stat_statements WHERE dbid = $1 ORDER BY calls DESC', [this.dbOid])
    ).rows;
    const sqlStatements: Record<string, number> = {};
    let sql = 0;
    for (const row of rows) {
      sql += Number(row.calls);
      const text = shorten(row.query);
      sqlStatements[text] = (sqlStatements[text] ?? 0) + Number(row.calls);
    }
    for (const k of Object.keys(sqlStatements)) sqlStatements[k] = per(sqlStatements[k]!, c.requests);
    const ours = new Set(this.redisSeen.filter((l) => l.args.some((a) => a.includes(this.prefix))).map((l) => l.source));
    const redisCommands: Record<string, number> = {};
    for (const { source, args } of this.redisSeen) {
      if (!ours.has(source)) continue;
      const name = args[0]!.toUpperCase();
      redisCommands[name] = (redisCommands[name] ?? 0) + 1;
    }
    for (const k of Object.keys(redisCommands)) redisCommands[k] = per(redisCommands[k]!, c.requests);
    return { case: c.name, requests: c.requests, sql: per(sql, c.requests), redis: per(reads, c.requests), sqlStatements, redisCommands };
  }

  /** Read events Redis has processed, over all clients (this INFO's own read included). */
  private async redisReads(): Promise<number> {
    return Number(/total_reads_processed:(\d+)/.exec(await this.stats.info('stats'))![1]);
  }

  async close(): Promise<void> {
    this.monitor.disconnect();
    this.stats.disconnect();
    await this.admin.end().catch(() => {});
    this.cluster.destroy();
  }
}

/** The cases our server is counted on: the three metadata reads, an upload, downloads whole and ranged, a delete. */
export function dropstreamCases(base: string, apiKey: string, fixtures: { fileId: number; downloadPath: string; deletable: number[] }, requests = 50): RoundTripCase[] {
  const auth = { Authorization: `Bearer ${apiKey}` };
  const expect = async (res: Response, status: number, what: string) => {
    await res.arrayBuffer();
    if (res.status !== status) throw new Error(`${what}: ${res.status}, expected ${status}`);
  };
  const get = (path: string, headers: Record<string, string> = auth, status = 200) => async () =>
    expect(await fetch(`${base}${path}`, { headers }), status, `GET ${path}`);
  const uploads = Math.min(requests, 20);
  return [
    { name: 'GET /api/v1/files/{id}', requests, send: get(`/api/v1/files/${fixtures.fileId}`) },
    { name: 'GET /api/v1/files', requests, send: get('/api/v1/files') },
    { name: 'GET /api/v1/stats', requests, send: get('/api/v1/stats') },
    {
      name: 'POST /api/v1/files/upload (1 KiB)',
      requests: uploads,
      async send(i) {
        const form = new FormData();
        form.append('file', new Blob([Buffer.alloc(1024, i)]), `rt-${i}.bin`);
        await expect(await fetch(`${base}/api/v1/files/upload`, { method: 'POST', headers: auth, body: form }), 201, 'upload');
      },
    },
    { name: 'GET /download/{token} (whole)', requests: uploads, send: get(fixtures.downloadPath, {}) },
    { name: 'GET /download/{token} (Range)', requests: uploads, send: get(fixtures.downloadPath, { Range: 'bytes=0-99' }, 206) },
    {
      name: 'DELETE /api/v1/files/{id}',
      requests: Math.min(uploads, fixtures.deletable.length),
      async send(i) {
        await expect(await fetch(`${base}/api/v1/files/${fixtures.deletable[i]}`, { method: 'DELETE', headers: auth }), 200, 'delete');
      },
    },
  ];
}

export interface DropstreamRoundTripsOptions {
  redisUrl: string;
  redisKeyPrefix: string;
  /** Scratch folder for the server's data (local object store). */
  workDir: string;
  /** The CLI to run (another build's dist/cli/index.js); default bin/dropstream.js. */
  entry?: string;
  requests?: number;
  /** Starts the ceiling party on the counted database; its GET cases are counted too. */
  ceiling?: (databaseUrl: string, publicUrl: string) => Promise<{ url: string; proc: { stop(): Promise<void> } }>;
}

/**
 * Starts our server on a counted database (local object store: the store is
 * not what is counted), seeds 25 files, warms every route once (the key
 * cache, the Redis script cache), then counts each case.
 */
export async function dropstreamRoundTrips(options: DropstreamRoundTripsOptions): Promise<RoundTripCount[]> {
  const { migrate, startDropstream } = await import('./dropstream.js');
  const counter = await RoundTripCounter.start(options.redisUrl, options.redisKeyPrefix);
  let server: Awaited<ReturnType<typeof startDropstream>> | undefined;
  try {
    await migrate(counter.databaseUrl, options.entry);
    server = await startDropstream({
      name: 'dropstream-roundtrips',
      entry: options.entry,
      databaseUrl: counter.databaseUrl,
      dataDir: options.workDir,
      redisKeyPrefix: options.redisKeyPrefix,
      env: { GC_INTERVAL: '0' },
    });
    const auth = { Authorization: `Bearer ${server.apiKey}` };
    const ids: number[] = [];
    let link = '';
    for (let i = 0; i < 45; i++) {
      const form = new FormData();
      // The last one, the download, is big enough for a range that is not the whole file.
      form.append('file', new Blob([i === 44 ? Buffer.alloc(4096, 7) : `seed ${i}`]), `seed-${i}.txt`);
      const res = await fetch(`${server.url}/api/v1/files/upload`, { method: 'POST', headers: auth, body: form });
      const body = (await res.json()) as { file_id: number; public_link: string };
      if (res.status !== 201) throw new Error(`seeding: ${res.status}`);
      ids.push(body.file_id);
      link = body.public_link;
    }
    const cases = dropstreamCases(server.url, server.apiKey, { fileId: ids[0]!, downloadPath: new URL(link).pathname, deletable: ids.slice(25) }, options.requests);
    // Warm-up: one request of each kind, uncounted (the delete warms on a file of its own).
    for (const c of cases) if (!c.name.startsWith('DELETE')) await c.send(0);
    await fetch(`${server.url}/api/v1/files/${ids[1]}`, { method: 'DELETE', headers: auth });
    const out: RoundTripCount[] = [];
    for (const c of cases) out.push(await counter.count(c));
    if (options.ceiling) {
      const ceiling = await options.ceiling(counter.databaseUrl, link.slice(0, link.indexOf('/download/')));
      try {
        const reads = dropstreamCases(ceiling.url, server.apiKey, { fileId: ids[0]!, downloadPath: '', deletable: [] }, options.requests).filter((c) => c.name.startsWith('GET /api'));
        for (const c of reads) await c.send(0);
        for (const c of reads) out.find((o) => o.case === c.name)!.ceiling = await counter.count(c);
      } finally {
        await ceiling.proc.stop();
      }
    }
    return out;
  } finally {
    await server?.proc.stop();
    await counter.close();
  }
}

/** A markdown table of counts (optionally with a second set to compare against, e.g. before a change). */
export function roundTripTable(counts: RoundTripCount[], before?: RoundTripCount[]): string[] {
  const prior = (name: string) => before?.find((b) => b.case === name);
  const head = before
    ? '| request | SQL statements before | after | Redis round trips before | after |'
    : '| request | SQL statements | Redis round trips |';
  const lines = [head, before ? '|---|---:|---:|---:|---:|' : '|---|---:|---:|'];
  for (const c of counts) {
    const p = prior(c.case);
    lines.push(before ? `| ${c.case} | ${p?.sql ?? '-'} | ${c.sql} | ${p?.redis ?? '-'} | ${c.redis} |` : `| ${c.case} | ${c.sql} | ${c.redis} |`);
  }
  return lines;
}

/** Per case, what the statements and commands were. */
export function roundTripDetails(counts: RoundTripCount[]): string[] {
  const lines: string[] = [];
  for (const c of counts) {
    lines.push(`- ${c.case} (${c.requests} requests):`);
    for (const [q, n] of Object.entries(c.sqlStatements)) lines.push(`  - SQL ${n} x \`${q}\``);
    for (const [q, n] of Object.entries(c.redisCommands)) lines.push(`  - Redis ${n} x ${q}`);
  }
  return lines;
}
