// The ceiling party for the metadata endpoints: the least a Node server can
// do for the same answers on the same stack. Koa + @koa/router, pg and
// ioredis straight, on our database and Redis, per request:
//   1. the key's SHA-256 -> account and plan: one SQL query (a join), or with
//      keyCacheMs > 0 from a map for that long (as ours caches; nothing here
//      invalidates it, which is what makes it a ceiling);
//   2. the minute and day counters of the account: one Redis round trip (a script);
//   3. the row(s): one query (the list: the page and the account's counter, side by side);
//   4. the same JSON as ours, with the same rate-limit headers;
//   5. one pino log line.
// No failure limits, no request ids, no metrics, no error catalogue.
//   node ceiling.js '{"databaseUrl","redisUrl","keyPrefix","publicUrl","keyCacheMs"}'  -> {"url"}
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import { Redis } from 'ioredis';
import Koa from 'koa';
import pg from 'pg';
import { pino } from 'pino';

const spec = JSON.parse(process.argv[2]!) as { databaseUrl: string; redisUrl: string; keyPrefix: string; publicUrl: string; keyCacheMs?: number };
// Columns without a time zone hold UTC.
pg.types.setTypeParser(1114, (value) => new Date(`${value.replace(' ', 'T')}Z`));
const db = new pg.Pool({ connectionString: spec.databaseUrl });
const redis = new Redis(spec.redisUrl);
const logger = pino({ base: undefined });

// Both counters in one trip; a request refused by the minute spends no daily point.
const COUNT = `
local function count(key, seconds)
  redis.call('set', key, 0, 'EX', seconds, 'NX')
  return redis.call('incr', key), redis.call('pttl', key)
end
local minute, ttl = count(KEYS[1], 60)
local day = 0
if minute <= tonumber(ARGV[1]) then day = count(KEYS[2], 90000) end
return {minute, ttl, day}`;
redis.defineCommand('ceilingCount', { numberOfKeys: 2, lua: COUNT });
const counters = redis as Redis & { ceilingCount(minute: string, day: string, perMinute: number): Promise<number[]> };

interface Caller {
  accountId: number;
  plan: {
    name: string; perMinute: number; perDay: number; maxFileSize: number; dailyUploads: number;
    concurrentUploads: number | null; maxTotalSize: number | null; maxExpiresIn: number | null;
  };
}

interface State {
  caller: Caller;
}

const cache = new Map<string, { caller: Caller; expires: number }>();

/** The caller of a key hash whose plan has the API, or undefined. */
async function lookUp(hash: string): Promise<Caller | undefined> {
  const hit = cache.get(hash);
  if (hit && hit.expires > Date.now()) return hit.caller;
  const { rows } = await db.query(
    `SELECT a.id, p.name, p.api_access, p.requests_per_minute, p.requests_per_day, p.max_file_size, p.daily_uploads,
            p.concurrent_uploads, p.max_total_size, p.max_expires_in
     FROM api_keys k JOIN accounts a ON a.id = k.account_id JOIN plans p ON p.id = a.plan_id
     WHERE k.hash = $1 AND k.revoked_at IS NULL`,
    [hash],
  );
  const row = rows[0];
  if (!row?.api_access) return undefined;
  const caller: Caller = {
    accountId: row.id,
    plan: {
      name: row.name, perMinute: row.requests_per_minute, perDay: row.requests_per_day, maxFileSize: Number(row.max_file_size), dailyUploads: row.daily_uploads,
      concurrentUploads: row.concurrent_uploads, maxTotalSize: row.max_total_size === null ? null : Number(row.max_total_size), maxExpiresIn: row.max_expires_in,
    },
  };
  if (spec.keyCacheMs) cache.set(hash, { caller, expires: Date.now() + spec.keyCacheMs });
  return caller;
}

const date = (d: Date) => d.toISOString().slice(0, 19).replace('T', ' ');
const file = (row: Record<string, any>) => ({
  file_id: row.id,
  filename: row.filename,
  size: Number(row.size),
  upload_date: date(row.created_at),
  download_count: Number(row.download_count),
  public_link: `${spec.publicUrl}/download/${row.link_token}`,
  expires_at: row.expires_at ? date(row.expires_at) : null,
  request_id: row.request_id,
});
const FILE_COLUMNS = 'id, filename, size, created_at, download_count, link_token, expires_at, request_id';

const app = new Koa();
app.use(async (ctx, next) => {
  const started = process.hrtime.bigint();
  await next();
  logger.info({ method: ctx.method, route: ctx._matchedRoute, status: ctx.status, account_id: ctx.state.caller?.accountId, ms: Number(process.hrtime.bigint() - started) / 1e6 }, 'request');
});

const router = new Router<State>({ prefix: '/api/v1' });
router.use(async (ctx, next) => {
  const key = /^Bearer[ \t]+(\S+)$/i.exec(ctx.get('Authorization'))?.[1];
  if (!key) return void ((ctx.status = 401), (ctx.body = { success: false, error: { code: 'missing_api_key', message: 'API key required' } }));
  const caller = await lookUp(createHash('sha256').update(key).digest('hex'));
  if (!caller) return void ((ctx.status = 401), (ctx.body = { success: false, error: { code: 'refused', message: 'refused' } }));
  const day = new Date().toISOString().slice(0, 10);
  const [minute, ttl, dayUsed] = await counters.ceilingCount(`${spec.keyPrefix}:rl:minute:${caller.accountId}`, `${spec.keyPrefix}:rl:day:${caller.accountId}:${day}`, caller.plan.perMinute);
  const remaining = Math.max(0, caller.plan.perMinute - minute!);
  const reset = Math.max(1, Math.ceil(ttl! / 1000));
  ctx.set({
    'X-RateLimit-Limit': String(caller.plan.perMinute),
    'X-RateLimit-Remaining': String(remaining),
    'X-RateLimit-Reset': String(Math.floor(Date.now() / 1000) + reset),
    'RateLimit-Policy': `"minute";q=${caller.plan.perMinute};w=60, "day";q=${caller.plan.perDay};w=86400`,
    RateLimit: `"minute";r=${remaining};t=${reset}`,
  });
  if (minute! > caller.plan.perMinute || dayUsed! > caller.plan.perDay) {
    ctx.status = 429;
    ctx.body = { success: false, error: { code: 'rate_limited', message: 'Rate limit exceeded' } };
    return;
  }
  ctx.state.caller = caller;
  await next();
});

router.get('/files/:id', async (ctx) => {
  const { rows } = await db.query(`SELECT ${FILE_COLUMNS} FROM files WHERE id = $1 AND account_id = $2`, [Number(ctx.params.id), ctx.state.caller.accountId]);
  if (!rows[0]) return void ((ctx.status = 404), (ctx.body = { success: false, error: { code: 'file_not_found', message: 'File not found' } }));
  ctx.body = { success: true, file: file(rows[0]) };
});

router.get('/files', async (ctx) => {
  const page = Number(ctx.query.page ?? 1);
  const limit = Number(ctx.query.limit ?? 20);
  const accountId = ctx.state.caller.accountId;
  const [list, count] = await Promise.all([
    db.query(`SELECT ${FILE_COLUMNS} FROM files WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`, [accountId, limit, (page - 1) * limit]),
    db.query('SELECT file_count FROM accounts WHERE id = $1', [accountId]),
  ]);
  const total = count.rows[0].file_count as number;
  ctx.body = { success: true, files: list.rows.map(file), pagination: { page, limit, total, pages: Math.ceil(total / limit) } };
});

router.get('/stats', async (ctx) => {
  const { rows } = await db.query('SELECT file_count, total_bytes, reserved_bytes FROM accounts WHERE id = $1', [ctx.state.caller.accountId]);
  const { plan } = ctx.state.caller;
  ctx.body = {
    success: true,
    stats: { total_files: rows[0].file_count, total_size: Number(rows[0].total_bytes), reserved_size: Number(rows[0].reserved_bytes) },
    limits: {
      max_file_size: plan.maxFileSize, daily_uploads: plan.dailyUploads, concurrent_uploads: plan.concurrentUploads,
      max_total_size: plan.maxTotalSize, max_expires_in: plan.maxExpiresIn,
    },
    plan: plan.name.toLowerCase(),
  };
});

app.use(router.routes());
const server = createServer(app.callback());
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => {
  redis.disconnect();
  void db.end().finally(() => process.exit(0));
});
