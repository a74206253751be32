// `npx tsx bench/relay-look.ts [--migrations DIR] [--query old|new|download-old|download] [--runs N]`
//
// What the webhook relay's look for due messages costs on PostgreSQL with a
// large outbox (issue 50): one account with 10 webhooks and 100,000 pending
// messages (half due now, half backing off), five other accounts with a few
// due messages each, and 100,000 delivered messages kept for the deliveries
// view. The relay looks every second and after every send, so this query's
// cost is paid often.
//
// --migrations names a prisma/migrations folder (default: this checkout's), so
// the same data can be measured on an older schema: `--migrations
// ../main/prisma/migrations --query old` is the look as it was before issue
// 50. `download` is the statement that counts a download of a file of the
// flooding account (src/links/links.ts), whose ten webhooks are past
// WEBHOOK_PENDING_DOWNLOADS (1000); `download-old` the same statement before
// the bound (no count, no replacement). Prints the median and 95th
// percentile of N runs, and the plan of one.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Prisma } from '../src/generated/prisma/client.js';
import { fileDownloadedSql, linkExhaustedSql } from '../src/webhooks/events.js';
import { createDatabase } from './lib/dropstream.js';
import { migrationsDir } from '../src/db/migrate.js';
import { RELAY_DEFAULTS } from '../src/webhooks/relay.js';
import { lookSql } from '../src/webhooks/turns.js';

const { values } = parseArgs({ options: { migrations: { type: 'string' }, query: { type: 'string' }, runs: { type: 'string' } } });
const runs = Number(values.runs ?? 200);
const which = values.query ?? 'new';

/** The look of src/webhooks/relay.ts before issue 50: every due message ranked per endpoint, oldest first. */
const OLD = `
  SELECT id, endpoint_id FROM (
    SELECT m.id, m.endpoint_id, m.next_attempt_at, row_number() OVER (PARTITION BY m.endpoint_id ORDER BY m.next_attempt_at) AS nth
    FROM webhook_messages m JOIN webhook_endpoints e ON e.id = m.endpoint_id AND e.disabled_at IS NULL
    WHERE m.next_attempt_at <= $1::timestamp(3)
  ) due WHERE nth <= 4 ORDER BY next_attempt_at LIMIT 100`;

/** The look of src/webhooks/relay.ts now, with nothing full on this instance. */
const look = (now: Date) => lookSql(now, { perEndpoint: RELAY_DEFAULTS.perEndpoint, accountConcurrency: 8, endpointTimeouts: RELAY_DEFAULTS.endpointTimeouts }, [], []);

/** src/links/links.ts's countDownload before issue 50: a file.downloaded per webhook, whatever it holds. */
const DOWNLOAD_OLD = `
  WITH file AS (SELECT id FROM files WHERE id = 1 FOR UPDATE),
  link AS (UPDATE links SET download_count = download_count + 1 WHERE id = 'l1' AND EXISTS (SELECT 1 FROM file) RETURNING *),
  counted AS (UPDATE files SET download_count = download_count + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM link) RETURNING *),
  downloaded AS (
    INSERT INTO webhook_messages (id, endpoint_id, type, body, next_attempt_at, created_at)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, 'file.downloaded',
      jsonb_build_object('type', 'file.downloaded', 'timestamp', $1::text, 'data', jsonb_build_object(
        'file_id', f.id, 'filename', f.filename, 'size', f.size, 'sha256', f.sha256, 'upload_date', to_char(f.created_at, 'YYYY-MM-DD HH24:MI:SS'),
        'download_count', f.download_count, 'expires_at', to_char(f.expires_at, 'YYYY-MM-DD HH24:MI:SS'), 'request_id', f.request_id))::text,
      $2::timestamp(3), $2::timestamp(3)
    FROM counted f JOIN webhook_endpoints e ON e.account_id = f.account_id AND e.disabled_at IS NULL AND 'file.downloaded' = ANY(e.events)
  )
  SELECT 1 AS counted`;

/** src/links/links.ts's countDownload now (the same fragments; Prisma's client adds its own overhead on top). */
const download = (now: Date) => Prisma.sql`
  WITH file AS (SELECT id FROM files WHERE id = 1 FOR UPDATE),
  link AS (UPDATE links SET download_count = download_count + 1 WHERE id = 'l1' AND EXISTS (SELECT 1 FROM file) RETURNING *),
  counted AS (UPDATE files SET download_count = download_count + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM link) RETURNING *),
  ${fileDownloadedSql('counted', now, { pending: 1000 })},
  exhausted AS (${linkExhaustedSql('link', 'counted', now)})
  SELECT (SELECT count(*) FROM dropped_downloads)::integer AS dropped`;

const QUERIES: Record<string, { sql: string; params: (now: Date) => unknown[] }> = {
  download: { sql: download(new Date()).text, params: (now) => download(now).values },
  old: { sql: OLD, params: (now) => [now] },
  'download-old': { sql: DOWNLOAD_OLD, params: (now) => [now.toISOString(), now] },
  new: { sql: look(new Date()).text, params: (now) => look(now).values },
};

const database = await createDatabase();
const client = new pg.Client({ connectionString: database.url });
await client.connect();
try {
  const dir = values.migrations ?? migrationsDir;
  for (const name of (await readdir(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort()) {
    await client.query(await readFile(join(dir, name, 'migration.sql'), 'utf8'));
  }
  await seed(client);
  const query = QUERIES[which];
  if (!query) throw new Error(`--query: one of ${Object.keys(QUERIES).join(', ')}`);
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs + 10; i++) {
    const started = process.hrtime.bigint();
    const result = await client.query(query.sql, query.params(new Date()));
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (i >= 10) times.push(ms);
    rows = result.rowCount ?? 0;
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(2);
  console.log(`query ${which}, migrations ${dir}: ${rows} rows; median ${at(0.5)} ms, p95 ${at(0.95)} ms over ${runs} runs`);
  const plan = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${query.sql}`, query.params(new Date()));
  console.log(plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n'));
} finally {
  await client.end();
  await database.drop();
}

async function seed(db: pg.Client): Promise<void> {
  await db.query(`INSERT INTO accounts (id, plan_id) SELECT n, (SELECT min(id) FROM plans) FROM generate_series(1, 6) n`);
  // Account 1: ten webhooks; accounts 2 to 6: one each.
  await db.query(`INSERT INTO webhook_endpoints (id, account_id, url, events, secret)
    SELECT 'wh_flood_' || n, 1, 'http://192.0.2.1/hook', ARRAY['file.downloaded'], 'whsec_x' FROM generate_series(1, 10) n
    UNION ALL SELECT 'wh_other_' || n, n, 'http://192.0.2.2/hook', ARRAY['file.uploaded'], 'whsec_y' FROM generate_series(2, 6) n`);
  const columns = await db.query(`SELECT 1 FROM information_schema.columns WHERE table_name = 'webhook_messages' AND column_name = 'file_id'`);
  const fileId = columns.rowCount ? ', file_id' : '';
  const fileValue = columns.rowCount ? ', n % 30' : '';
  // 100,000 pending of account 1: even n due (in the last hour), odd n backing off (due within five minutes).
  await db.query(`INSERT INTO webhook_messages (id, endpoint_id, type, body, attempts, next_attempt_at, created_at${fileId})
    SELECT 'msg_flood_' || n, 'wh_flood_' || (n % 10 + 1), 'file.downloaded', '{}', 1,
      CASE WHEN n % 2 = 0 THEN now() - interval '1 hour' * random() ELSE now() + interval '5 minutes' * random() END,
      now() - interval '1 hour'${fileValue}
    FROM generate_series(1, 100000) n`);
  // A few due for each other account, newer than the flood.
  await db.query(`INSERT INTO webhook_messages (id, endpoint_id, type, body, next_attempt_at, created_at)
    SELECT 'msg_other_' || a || '_' || n, 'wh_other_' || a, 'file.uploaded', '{}', now() - interval '1 second', now() - interval '1 second'
    FROM generate_series(2, 6) a, generate_series(1, 3) n`);
  // Delivered ones, kept 30 days for the deliveries view.
  await db.query(`INSERT INTO webhook_messages (id, endpoint_id, type, body, attempts, next_attempt_at, delivered_at, created_at)
    SELECT 'msg_done_' || n, 'wh_other_' || (n % 5 + 2), 'file.uploaded', '{}', 1, NULL, now() - interval '1 day', now() - interval '1 day'
    FROM generate_series(1, 100000) n`);
  // A file of account 1 and its link, for the download statement.
  await db.query(`INSERT INTO files (id, account_id, filename, size, sha256, storage_key, link_token) VALUES (1, 1, 'f', 1, 'x', 'k', 't')`);
  await db.query(`INSERT INTO links (id, file_id, token) VALUES ('l1', 1, 't')`);
  await db.query('VACUUM ANALYZE');
}
