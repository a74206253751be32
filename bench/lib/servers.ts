// The other long-running parties: s3rver, the two peers, the bare Koa
// handler and the ceiling party, each a compiled script from bench/procs run by plain `node` with
// the same allocator settings as our server, so no party gets a different
// malloc than another.
import { join } from 'node:path';
import { cleanEnv, MALLOC_ENV } from './dropstream.js';
import { start, type Proc } from './proc.js';

/** Where `tsc -p bench` puts the compiled child scripts. */
export const PROCS = join('bench', 'data', 'dist', 'bench', 'procs');
export const procScript = (name: string) => join(PROCS, `${name}.js`);

const env = (extra: Record<string, string> = {}) => ({ ...MALLOC_ENV, ...cleanEnv(), ...extra });

export interface Running {
  proc: Proc;
  url: string;
  startupPeakRss: number;
}

async function startServer(name: string, script: string, args: string[], extraEnv?: Record<string, string>): Promise<Running> {
  const { proc, ready } = await start({ name, args: [procScript(script), ...args], env: env(extraEnv), ready: (l) => typeof l.url === 'string' });
  return { proc, url: String(ready.url), startupPeakRss: await proc.peakRss() };
}

export async function startS3rver(): Promise<{ proc: Proc; endpoint: string; directory: string }> {
  const { proc, ready } = await start({ name: 's3rver', args: [procScript('s3rver')], env: env(), ready: (l) => typeof l.endpoint === 'string' });
  return { proc, endpoint: String(ready.endpoint), directory: String(ready.directory) };
}

/** tus-node-server; its part files go to `tmpDir`. */
export const startTus = (endpoint: string, bucket: string, tmpDir: string) =>
  startServer('tus-server', 'tus-server', [JSON.stringify({ endpoint, bucket, partSize: 8 * 1024 * 1024 })], { TMPDIR: tmpDir });

/** tus-node-server with @tus/file-store, writing into `directory`. */
export const startTusFiles = (directory: string) => startServer('tus-server-files', 'tus-server', [JSON.stringify({ directory })]);

export const startMulter = (endpoint: string, bucket: string) => startServer('multer-server', 'multer-server', [JSON.stringify({ endpoint, bucket })]);

/** A bare node:http server piping GetObject of GET /<key> to the response (bench/procs/download-proxy.ts). */
export const startDownloadProxy = (endpoint: string, bucket: string) => startServer('download-proxy', 'download-proxy', [JSON.stringify({ endpoint, bucket })]);

/** Express + GetObject of GET /<key> piped to the response (bench/procs/express-download.ts): the download peer. */
export const startExpressDownload = (endpoint: string, bucket: string) => startServer('express-download', 'express-download', [JSON.stringify({ endpoint, bucket })]);

/** A bare node:http server piping fs.createReadStream to the response (bench/procs/download-file.ts): the local store's floor. */
export const startDownloadFile = (root: string) => startServer('download-file', 'download-file', [JSON.stringify({ root })]);

/** The bare Koa handler serving canned responses (a JSON file of url -> body). */
export const startBareKoa = (responsesFile: string) => startServer('bare-koa', 'bare-koa', [responsesFile]);

/** The ceiling party (bench/procs/ceiling.ts) on our database and Redis. */
export const startCeiling = (spec: { databaseUrl: string; redisUrl: string; keyPrefix: string; publicUrl: string; keyCacheMs?: number }) =>
  startServer(spec.keyCacheMs ? 'ceiling-cached' : 'ceiling', 'ceiling', [JSON.stringify(spec)]);

/** The local uploads' limit: node:http + busboy into files in `dir` (bench/procs/busboy-file-server.ts). */
export const startBusboyFile = (dir: string) => startServer('busboy-file-server', 'busboy-file-server', [JSON.stringify({ dir })]);

