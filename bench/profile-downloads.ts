// `npx tsx bench/profile-downloads.ts [--size-mib 1024] [--reps 2] [--flags "..."] [--no-profile]`:
// where a download's CPU goes in our server, without the upload that put the
// file there; with --no-profile, the server's CPU seconds per GB (read from
// /proc) beside the bare proxy's / bare file server's, alternating, for A/B
// trials of node flags (--flags, given to our server only). One server (unprofiled) uploads the file to s3rver and to the local
// store; a second one on the same database and data, started with
// `node --cpu-prof`, serves `reps` whole downloads of each (and the 64 x 1 MiB
// ranges once); the summary goes to bench/data/profiles-downloads/summary.md.
// Needs `npm run build` and the bench's compiled procs (one `npm run bench`).
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { auth, createDatabase, migrate, startDropstream, type Dropstream } from './lib/dropstream.js';
import { summarizeProfiles } from './lib/profile.js';
import { cpuSeconds, MiB, run } from './lib/proc.js';
import { procScript, startDownloadFile, startDownloadProxy, startS3rver } from './lib/servers.js';
import pg from 'pg';

const { values } = parseArgs({
  options: { 'size-mib': { type: 'string', default: '1024' }, reps: { type: 'string', default: '2' }, flags: { type: 'string', default: '' }, 'no-profile': { type: 'boolean', default: false } },
});
const flags = values.flags!.split(/\s+/).filter(Boolean);
const profile = !values['no-profile'];
const size = Number(values['size-mib']) * MiB;
const reps = Number(values.reps);
const out = join('bench', 'data', 'profiles-downloads');
const work = join('bench', 'data', 'work-profile');
await rm(out, { recursive: true, force: true });
await rm(work, { recursive: true, force: true });

const db = await createDatabase();
await migrate(db.url);
const s3 = await startS3rver();
try {
  for (const store of ['s3', 'local'] as const) {
    const dataDir = join(work, store);
    await mkdir(dataDir, { recursive: true });
    const options = { databaseUrl: db.url, dataDir, redisKeyPrefix: `dropstream-profile-${process.pid}`, s3: store === 's3' ? { endpoint: s3.endpoint, bucket: 'dropstream' } : undefined };
    const uploader = await startDropstream({ ...options, name: `uploader-${store}` });
    const link = await uploadOne(uploader, size);
    await uploader.proc.stop();
    const server = await startDropstream({ ...options, name: `profiled-${store}`, nodeFlags: [...flags, ...(profile ? ['--cpu-prof', '--cpu-prof-dir', join(out, store)] : [])] });
    const url = `${server.url}${link}`;
    const key = await storageKey(db.url, link.split('/').pop()!);
    const bare = store === 's3' ? await startDownloadProxy(s3.endpoint, 'dropstream') : await startDownloadFile(join(dataDir, 'objects'));
    const parties = [
      { label: 'ours', pid: server.proc.pid, url },
      { label: store === 's3' ? 'bare proxy' : 'bare file', pid: bare.proc.pid, url: `${bare.url}/${encodeURIComponent(key)}` },
    ];
    for (let i = 0; i < reps; i++) {
      for (const party of profile ? parties.slice(0, 1) : parties) {
        const cpu0 = await cpuSeconds(party.pid);
        const r = await run<{ bytes: number; wall: number }>({ name: 'download-client', args: [procScript('download-client'), JSON.stringify({ mode: 'http', url: party.url })] });
        const cpu = (await cpuSeconds(party.pid)) - cpu0;
        console.log(`${store} whole, ${party.label}: ${(r.bytes / 1e6 / r.wall).toFixed(1)} MB/s, ${(cpu / (r.bytes / 1e9)).toFixed(3)} CPU s/GB${profile ? ' (profiled)' : ''}`);
      }
    }
    await bare.proc.stop();
    const ranges = Array.from({ length: 64 }, (_, i) => {
      const start = Math.floor((i * (size - MiB)) / 63);
      return [start, start + MiB - 1];
    });
    await run({ name: 'download-client', args: [procScript('download-client'), JSON.stringify({ mode: 'http', url, ranges })] });
    await server.proc.stop();
  }
  if (profile) console.log(await summarizeProfiles(out));
} finally {
  await s3.proc.stop();
  await db.drop();
  await rm(work, { recursive: true, force: true });
}

async function uploadOne(server: Dropstream, bytes: number): Promise<string> {
  const uploaded = await run<{ uploads: { body: string }[] }>({
    name: 'upload-client',
    args: [procScript('upload-client'), JSON.stringify({ mode: 'multipart', url: `${server.url}/api/v1/files/upload`, headers: auth(server), size: bytes, count: 1 })],
  });
  return new URL(JSON.parse(uploaded.uploads[0]!.body).public_link as string).pathname;
}

async function storageKey(databaseUrl: string, token: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<{ storage_key: string }>('SELECT storage_key FROM files WHERE link_token = $1', [token])).rows[0]!.storage_key;
  } finally {
    await client.end();
  }
}
