// `node bench/idle-memory.mjs <pg|embedded> [idleSeconds]` (after `npm run build`)
//
// Idle memory of `dropstream serve` on the local store: a first start on a new
// database (a PostgreSQL database made with createdb on 127.0.0.1 as postgres,
// or an empty DATA_DIR for the embedded default), then a restart on the same
// one. Prints one JSON line, MiB: VmHWM at "listening" (_peak), VmRSS after
// idleSeconds (20) (_idle), and V8's heap and external memory from /metrics.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
const [mode, idleArg] = process.argv.slice(2);
const root = new URL('..', import.meta.url).pathname;
const idle = Number(idleArg ?? 20);
const dataDir = mkdtempSync(join(tmpdir(), 'dropstream-idle-'));
const TOKEN = 'x'.repeat(32);
const env = { ...process.env, DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ADMIN_TOKEN: TOKEN };
delete env.NODE_OPTIONS;
let db;
if (mode === 'pg') {
  db = `dropstream_idle_${process.pid}`;
  execFileSync('createdb', ['-h', '127.0.0.1', '-U', 'postgres', db]);
  env.DATABASE_URL = `postgresql://postgres@127.0.0.1:5432/${db}`;
}
async function once(tag) {
  const child = spawn(process.execPath, ['bin/dropstream.js', 'serve'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const ready = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (l) => { if (l.includes('"dropstream listening"')) resolve(JSON.parse(l)); });
    child.once('exit', (c) => reject(new Error('exit ' + c)));
  });
  const status = () => { const s = readFileSync(`/proc/${child.pid}/status`, 'utf8'); const kb = (f) => Math.round(Number(new RegExp(`${f}:\\s+(\\d+) kB`).exec(s)[1]) / 1024); return { rss: kb('VmRSS'), hwm: kb('VmHWM') }; };
  const atListen = status();
  await sleep(idle * 1000);
  const now = status();
  const text = await (await fetch(`${ready.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
  const metric = (re) => { const m = new RegExp(`^${re}\\s+([0-9.e+]+)`, 'm').exec(text); return m ? Math.round(Number(m[1]) / 1048576 * 10) / 10 : null; };
  const out = { [`${tag}_peak`]: atListen.hwm, [`${tag}_idle`]: now.rss,
    [`${tag}_heap_used`]: metric('\\w*nodejs_heap_size_used_bytes'), [`${tag}_heap_total`]: metric('\\w*nodejs_heap_size_total_bytes'), [`${tag}_external`]: metric('\\w*nodejs_external_memory_bytes') };
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return out;
}
try {
  const first = await once('first');
  const second = await once('second');
  console.log(JSON.stringify({ mode, ...first, ...second }));
} finally {
  rmSync(dataDir, { recursive: true, force: true });
  if (db) execFileSync('dropdb', ['-h', '127.0.0.1', '-U', 'postgres', '--force', db]);
}
