// Where our server's memory goes under metadata load (issue 24): starts one
// server (PostgreSQL, Redis, s3rver), seeds a file, then samples the admin
// /metrics every second (prom-client's process and V8 heap-space gauges) at
// idle, during 50 connections of GET <path>, and after 12 s idle (time for
// the idle collection). Prints the maxima in MiB.
//
//   npx tsx bench/memory-breakdown.ts [--path /api/v1/files/{id}] [--env '{"NODE_OPTIONS":"--max-semi-space-size=16"}'] [--flags '--heap-growing-percent=50']
import { execFileSync } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { auth, createDatabase, migrate, startDropstream } from './lib/dropstream.js';
import { run, setLogDir } from './lib/proc.js';
import { procScript, startS3rver } from './lib/servers.js';

const { values } = parseArgs({
  options: {
    path: { type: 'string', default: '/api/v1/files/{id}' },
    env: { type: 'string', default: '{}' },
    seconds: { type: 'string', default: '12' },
    // Node or V8 flags for the server, space-separated (V8 flags NODE_OPTIONS refuses, e.g. --heap-growing-percent=50).
    flags: { type: 'string', default: '' },
  },
});
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.json']);
const work = join('bench', 'data', 'memory-breakdown');
await rm(work, { recursive: true, force: true });
await mkdir(join(work, 'logs'), { recursive: true });
setLogDir(join(work, 'logs'));

const db = await createDatabase();
const s3 = await startS3rver();
await migrate(db.url);
const server = await startDropstream({
  name: 'dropstream',
  databaseUrl: db.url,
  dataDir: join(work, 'data'),
  redisKeyPrefix: `dropstream-breakdown-${process.pid}`,
  s3: { endpoint: s3.endpoint, bucket: 'dropstream' },
  env: JSON.parse(values.env!) as Record<string, string>,
  nodeFlags: values.flags!.split(' ').filter(Boolean),
});

/** The process and heap gauges of /metrics, in MiB: rss, heap_total, heap_used, external, and each heap space's size. */
async function sample(): Promise<Record<string, number>> {
  const res = await fetch(`${server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${server.adminToken}` } });
  const out: Record<string, number> = {};
  const names: [RegExp, string][] = [
    [/^dropstream_process_resident_memory_bytes (\S+)/, 'rss'],
    [/^dropstream_nodejs_heap_size_total_bytes (\S+)/, 'heap_total'],
    [/^dropstream_nodejs_heap_size_used_bytes (\S+)/, 'heap_used'],
    [/^dropstream_nodejs_external_memory_bytes (\S+)/, 'external'],
    [/^dropstream_nodejs_heap_space_size_total_bytes\{space="(new|old|code|large_object)"\} (\S+)/, 'space'],
  ];
  for (const line of (await res.text()).split('\n')) {
    for (const [re, name] of names) {
      const m = re.exec(line);
      if (!m) continue;
      if (name === 'space') out[`${m[1]}_space`] = Math.round(Number(m[2]) / 1048576);
      else out[name] = Math.round(Number(m[1]) / 1048576);
    }
  }
  return out;
}

try {
  const seeded = await run<{ uploads: { body: string }[] }>({
    name: 'upload-client',
    args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${server.url}/api/v1/files/upload`, headers: auth(server), size: 1024, count: 5 })],
  });
  const path = values.path!.replace('{id}', String(JSON.parse(seeded.uploads[0]!.body).file_id));
  console.log(`idle after start: ${JSON.stringify(await sample())}`);
  let done = false;
  const load = run<{ requests: { average: number } }>({
    name: 'autocannon',
    args: [procScript('load'), JSON.stringify({ url: `${server.url}${path}`, connections: 50, seconds: Number(values.seconds), headers: auth(server) })],
  }).finally(() => (done = true));
  const peak: Record<string, number> = {};
  while (!done) {
    await new Promise((r) => setTimeout(r, 1000));
    if (done) break;
    for (const [k, v] of Object.entries(await sample())) peak[k] = Math.max(peak[k] ?? 0, v);
  }
  console.log(`under load (${Math.round((await load).requests.average)} req/s), maxima: ${JSON.stringify(peak)}`);
  await new Promise((r) => setTimeout(r, 12_000));
  console.log(`12 s after: ${JSON.stringify(await sample())}`);
} finally {
  await server.proc.stop();
  await s3.proc.stop();
  await db.drop();
}
