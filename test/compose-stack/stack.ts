// Helpers for the compose stack test (stack.stack.ts): docker and compose
// commands, log lines per container, which replica is serving a transfer.
// What .ci/compose-stack sets: DOCKER_HOST and DOCKER_CONFIG (the private
// engine and its Compose v2 plugin), COMPOSE_FILE (the project's file and
// the MinIO stand-in), STACK_ENV_FILE (the .env the stack runs with),
// and STACK_URL (the proxy, as seen from the
// network namespace this process runs in).
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);
const dockerCli = process.env.DOCKER_CLI ?? '/usr/bin/docker';
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Fails at once, naming what is missing, when the test is not run through .ci/compose-stack. */
export function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this through .ci/compose-stack, which starts the engine and the stack`);
  return value;
}

export async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run(dockerCli, args, { maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}

/** `docker compose --env-file STACK_ENV_FILE ...` (the files come from COMPOSE_FILE); `env` adds to the environment, e.g. APP_REPLICAS. */
export async function compose(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await run(dockerCli, ['compose', '--env-file', required('STACK_ENV_FILE'), ...args], {
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, ...env },
  });
  return stdout.trim();
}

/** The values of the .env the stack runs with (KEY=VALUE lines). */
export function stackEnv(): Record<string, string> {
  const lines = readFileSync(required('STACK_ENV_FILE'), 'utf8').split('\n');
  return Object.fromEntries(lines.filter((l) => /^[A-Z][A-Z0-9_]*=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

/** `compose ps` as objects (Compose 2.21+ prints one JSON object a line). */
export async function services(all = false): Promise<{ Service: string; Name: string; ID: string; State: string; Health: string; ExitCode: number }[]> {
  const out = await compose(['ps', '--format', 'json', ...(all ? ['--all'] : [])]);
  return out.split('\n').filter(Boolean).map((line) => JSON.parse(line));
}

/** Container names of the running app replicas. */
export async function replicas(): Promise<string[]> {
  return (await services()).filter((s) => s.Service === 'app' && s.State === 'running').map((s) => s.Name).sort();
}

/** JSON log lines of a container (other lines skipped). */
export async function logLines(name: string): Promise<Record<string, any>[]> {
  const { stdout } = await run(dockerCli, ['logs', name], { maxBuffer: 64 * 1024 * 1024 });
  return stdout.split('\n').flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, any>];
    } catch {
      return [];
    }
  });
}

/**
 * Which replica logged each request id, once all are logged or after 5 s
 * (the server writes its log in batches, up to 250 ms after a request ends).
 */
export async function servedBy(names: string[], ids: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (let waited = 0; found.size < ids.length && waited <= 5000; waited += 250) {
    if (waited) await sleep(250);
    for (const name of names) {
      for (const line of await logLines(name)) if (ids.includes(line.req_id)) found.set(line.req_id, name);
    }
  }
  return found;
}

/**
 * Bytes each replica's server process has handed to write calls, sockets
 * included (wchar in /proc/PID/io), read from this side: the tests run in
 * the host's PID namespace, and a `docker exec` per sample would take a
 * second on a busy machine.
 */
export async function writeCounters(names: string[]): Promise<() => Promise<number[]>> {
  const pids = await Promise.all(names.map((name) => docker('inspect', '--format', '{{.State.Pid}}', name)));
  return () => Promise.all(pids.map(async (pid) => Number(/^wchar: (\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN)));
}

/** A replica's own metrics (its admin port, inside the container, with the token from the shared volume). */
export async function metricsOf(name: string): Promise<string> {
  const script =
    "fetch('http://127.0.0.1:3001/metrics',{headers:{authorization:'Bearer '+require('fs').readFileSync('/data/admin-token','utf8').trim()}})" +
    '.then(async r=>{if(!r.ok)process.exit(1);process.stdout.write(await r.text())})';
  return docker('exec', name, 'node', '-e', script);
}

/** The value of an unlabelled metric. */
export const metricValue = (text: string, metric: string) => Number(new RegExp(`^${metric} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

/** One number from the stack's PostgreSQL, through psql in its container. */
export async function sqlNumber(query: string): Promise<number> {
  const env = stackEnv();
  const out = await compose(['exec', '-T', 'postgres', 'psql', '-U', env.POSTGRES_USER ?? 'dropstream', '-d', env.POSTGRES_DB ?? 'dropstream', '-tAc', query]);
  return Number(out);
}

/**
 * Multipart uploads open in the bucket (S3 ListMultipartUploads), asked by
 * an app container with its own S3 settings and SDK: the same call against
 * MinIO or its stand-in.
 */
export async function openMultipartUploads(): Promise<number> {
  const script =
    "const {S3Client,ListMultipartUploadsCommand}=require('@aws-sdk/client-s3');const e=process.env;" +
    "new S3Client({endpoint:e.S3_ENDPOINT,forcePathStyle:true,region:e.S3_REGION||'us-east-1',credentials:{accessKeyId:e.S3_ACCESS_KEY_ID,secretAccessKey:e.S3_SECRET_ACCESS_KEY}})" +
    '.send(new ListMultipartUploadsCommand({Bucket:e.S3_BUCKET})).then(r=>console.log((r.Uploads||[]).length),e=>{console.error(e);process.exit(1)})';
  return Number(await compose(['exec', '-T', 'app', 'node', '-e', script]));
}

/** curl, exit code and what it printed (stdout: the -w format); never throws. */
export async function curl(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const child = spawn('curl', ['-sS', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const [code] = await once(child, 'close');
  return { code: code as number, out, err };
}

export async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
