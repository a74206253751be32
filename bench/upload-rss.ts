// Uploads files of the given sizes through the API into s3rver (or the local
// store) and reports throughput and the server's peak RSS, read from the
// kernel (/proc/<pid>/status VmHWM). The server and s3rver run as separate
// processes; the bytes are a repeated random MiB, generated as they are sent.
//
//   npx tsx bench/upload-rss.ts [--store s3|local] 1024 5120   (sizes in MiB)
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

const MiB = 1024 * 1024;
const { values, positionals } = parseArgs({ allowPositionals: true, options: { store: { type: 'string', default: 's3' } } });
const sizes = (positionals.length ? positionals : ['1024']).map((s) => Number(s) * MiB);

function firstJsonLine(child: ChildProcess, match: (o: any) => boolean): Promise<any> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      try {
        const obj = JSON.parse(line);
        if (match(obj)) resolve(obj);
      } catch {}
    });
    child.once('exit', (code) => reject(new Error(`process exited with ${code}`)));
  });
}

async function peakRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

async function upload(url: string, key: string, size: number): Promise<{ status: number; body: string; seconds: number; sha256: string }> {
  const block = randomBytes(MiB);
  const hash = createHash('sha256');
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const boundary = 'bench-boundary';
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.bin"\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const req = request(`${url}/api/v1/files/upload`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${key}`,
        'Content-Type': `multipart/form-data; boundary=${boundary}`,
        'Content-Length': head.length + size + tail.length,
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () =>
        resolve({ status: res.statusCode!, body, seconds: Number(process.hrtime.bigint() - started) / 1e9, sha256: hash.digest('hex') }),
      );
    });
    req.on('error', reject);
    req.write(head);
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        const chunk = size - sent >= MiB ? block : block.subarray(0, size - sent);
        sent += chunk.length;
        hash.update(chunk);
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end(tail);
    };
    pump();
  });
}

const dataDir = await mkdtemp(join(tmpdir(), 'dropstream-bench-'));
let s3: ChildProcess | undefined;
// The allocator settings `npm start` and the Docker image use (see README, Memory).
const env: Record<string, string> = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '131072', ...(process.env as Record<string, string>), DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
if (values.store === 's3') {
  s3 = spawn(process.execPath, ['--import', 'tsx', 'bench/s3rver-process.ts'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const { endpoint } = await firstJsonLine(s3, (o) => o.endpoint);
  Object.assign(env, { S3_ENDPOINT: endpoint, S3_BUCKET: 'bench', S3_ACCESS_KEY_ID: 'S3RVER', S3_SECRET_ACCESS_KEY: 'S3RVER', S3_FORCE_PATH_STYLE: 'true' });
}
const server = spawn(process.execPath, ['bin/dropstream.js', 'serve'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
try {
  const ready = await firstJsonLine(server, (o) => o.msg === 'dropstream listening');
  const token = (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
  const created = await fetch(`${ready.adminUrl}/admin/accounts`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ plan: 'business' }),
  }).then((r) => r.json() as Promise<{ api_key: string }>);
  const idleRss = await peakRss(server.pid!);
  console.log(`store=${values.store} node=${process.version} server peak RSS before uploads: ${(idleRss / MiB).toFixed(1)} MiB`);
  for (const size of sizes) {
    const result = await upload(ready.url, created.api_key, size);
    const body = JSON.parse(result.body);
    let intact = false;
    if (result.status === 201) {
      const res = await fetch(`${ready.url}${new URL(body.public_link).pathname}`);
      intact = res.headers.get('etag') === `"${result.sha256}"` && Number(res.headers.get('content-length')) === size;
      await res.body?.cancel();
    }
    console.log(
      JSON.stringify({
        size_mib: size / MiB,
        status: result.status,
        seconds: Number(result.seconds.toFixed(2)),
        mb_per_s: Number((size / 1e6 / result.seconds).toFixed(1)),
        server_peak_rss_mib: Number(((await peakRss(server.pid!)) / MiB).toFixed(1)),
        intact,
      }),
    );
  }
} finally {
  server.kill('SIGTERM');
  s3?.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  await rm(dataDir, { recursive: true, force: true });
}
