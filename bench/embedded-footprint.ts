// `npx tsx bench/embedded-footprint.ts [--reps N] [--uploads N] [--size MiB] [--idle SECONDS] [--postgres URL]`
//
// What the embedded default (PGlite, local objects) costs in memory: the
// kernel's VmHWM (peak) and VmRSS (now) of the `dropstream serve` process,
// read from /proc/<pid>/status at four points:
//   1. first start on an empty DATA_DIR, migrations included (peak at "listening");
//   2. idle, `--idle` seconds (30) after that start: V8 frees what the start
//      left behind (initdb, the schema engine) within 10-20 s, not at once;
//   3. after N uploads of `size` MiB each (and a list, a download of each);
//   4. a second start on the same DATA_DIR (no migrations), peak and idle.
// With --postgres, the same for DATABASE_URL=<a new database on that server>
// (the comparison figure). Runs the compiled build (npm run build first) with
// the allocator settings the launcher sets. Prints a JSON line per run and a
// table of medians; nothing else is written.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const MiB = 1024 * 1024;
const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '3' },
    uploads: { type: 'string', default: '5' },
    size: { type: 'string', default: '16' },
    idle: { type: 'string', default: '30' },
    postgres: { type: 'string' },
  },
});
const reps = Number(values.reps);
const uploads = Number(values.uploads);
const size = Number(values.size) * MiB;
const idleSeconds = Number(values.idle);

async function memory(pid: number): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
  return { rss: Math.round(kb('VmRSS')), hwm: Math.round(kb('VmHWM')) };
}

interface Server {
  child: ChildProcess;
  url: string;
  adminUrl: string;
  /** Memory read the moment it logged "dropstream listening". */
  atListen: { rss: number; hwm: number };
  /** Seconds from spawn to listening. */
  startSeconds: number;
}

async function serve(env: Record<string, string>): Promise<Server> {
  const t0 = performance.now();
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
  delete childEnv.NODE_OPTIONS;
  const child = spawn(process.execPath, ['bin/dropstream.js', 'serve'], {
    env: { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '65536', ...childEnv },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<{ url: string; adminUrl: string }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('"dropstream listening"')) resolve(JSON.parse(line));
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return { child, ...ready, atListen: await memory(child.pid!), startSeconds: (performance.now() - t0) / 1000 };
}

async function stop(server: Server): Promise<void> {
  const exited = once(server.child, 'exit');
  server.child.kill('SIGTERM');
  await exited;
}

async function workload(server: Server, dataDir: string, adminToken?: string): Promise<void> {
  const token = adminToken ?? (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
  const admin = await fetch(`${server.adminUrl}/admin/accounts`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ plan: 'pro' }),
  });
  const { api_key: key } = (await admin.json()) as { api_key: string };
  const body = Buffer.alloc(size, 7);
  for (let i = 0; i < uploads; i++) {
    const form = new FormData();
    form.append('file', new Blob([body]), `file-${i}.bin`);
    const res = await fetch(`${server.url}/api/v1/files/upload`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form });
    const json = (await res.json()) as { public_link: string };
    if (res.status !== 201) throw new Error(`upload answered ${res.status}: ${JSON.stringify(json)}`);
    const download = await fetch(json.public_link.replace(/^https?:\/\/[^/]+/, server.url));
    await download.arrayBuffer();
  }
  await (await fetch(`${server.url}/api/v1/files`, { headers: { Authorization: `Bearer ${key}` } })).json();
}

type Figures = Record<string, number>;

async function run(kind: 'pglite' | 'postgresql'): Promise<Figures> {
  const dataDir = await mkdtemp(join(tmpdir(), 'dropstream-footprint-'));
  let dbName: string | undefined;
  const env: Record<string, string> = { DATA_DIR: dataDir };
  if (kind === 'postgresql') {
    const base = new URL(values.postgres!);
    dbName = `dropstream_footprint_${process.pid}_${Date.now().toString(36)}`;
    execFileSync('createdb', ['-h', base.hostname, '-p', base.port || '5432', '-U', base.username, dbName]);
    base.pathname = `/${dbName}`;
    env.DATABASE_URL = base.toString();
  }
  try {
    const first = await serve(env);
    await sleep(idleSeconds * 1000);
    const idle = await memory(first.child.pid!);
    await workload(first, dataDir);
    await sleep(idleSeconds * 1000);
    const afterUploads = await memory(first.child.pid!);
    await stop(first);
    const second = await serve(env);
    await sleep(idleSeconds * 1000);
    const secondIdle = await memory(second.child.pid!);
    await stop(second);
    return {
      first_start_s: Number(first.startSeconds.toFixed(1)),
      first_start_peak: first.atListen.hwm,
      idle_rss: idle.rss,
      after_uploads_rss: afterUploads.rss,
      after_uploads_peak: afterUploads.hwm,
      restart_peak: second.atListen.hwm,
      restart_idle_rss: secondIdle.rss,
    };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
    if (dbName) {
      const base = new URL(values.postgres!);
      execFileSync('dropdb', ['-h', base.hostname, '-p', base.port || '5432', '-U', base.username, '--force', '--if-exists', dbName]);
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const kinds: ('pglite' | 'postgresql')[] = values.postgres ? ['pglite', 'postgresql'] : ['pglite'];
const results: Record<string, Figures[]> = {};
for (let rep = 0; rep < reps; rep++) {
  for (const kind of kinds) {
    const figures = await run(kind);
    (results[kind] ??= []).push(figures);
    console.log(JSON.stringify({ kind, rep, ...figures }));
  }
}
console.log(`\nMiB (median of ${reps}; min-max), node ${process.version}, ${uploads} uploads of ${size / MiB} MiB`);
for (const kind of kinds) {
  const runs = results[kind]!;
  console.log(kind);
  for (const key of Object.keys(runs[0]!)) {
    const xs = runs.map((r) => r[key]!);
    console.log(`  ${key.padEnd(20)} ${String(median(xs)).padStart(6)}  (${Math.min(...xs)}-${Math.max(...xs)})`);
  }
}
