// The limit party of plain uploads into the local store: a bare node:http
// server that pipes the multipart body through busboy into a file, as our
// local store does (a temp file in `<dir>/.tmp`, fdatasynced, renamed into
// place, its directory fsynced: the same policy as LocalObjectStore.put,
// src/storage/local-durable.ts). No framework, no
// database, no hash, no limits, no log line. What we lose against it is
// the cost of everything that makes an upload ours.
//   node busboy-file-server.js '{"dir"}'  -> {"url"}; POST multipart -> 201 {"path","size"}
import { randomUUID } from 'node:crypto';
import { close as closeCb, createWriteStream, fdatasync as fdatasyncCb, type WriteStream } from 'node:fs';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import busboy from 'busboy';

const fdatasync = promisify(fdatasyncCb);
const close = promisify(closeCb);

const spec = JSON.parse(process.argv[2]!) as { dir: string };
const tmp = join(spec.dir, '.tmp');
await mkdir(tmp, { recursive: true });

async function store(file: Readable): Promise<{ path: string; size: number }> {
  const name = randomUUID();
  const temp = join(tmp, name);
  // The same fs.WriteStream as before, left open for the fdatasync on its own fd.
  const out = createWriteStream(temp, { flags: 'wx', mode: 0o600, autoClose: false }) as WriteStream & { fd: number | null };
  try {
    await pipeline(file, out);
    await fdatasync(out.fd!);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  } finally {
    if (out.fd !== null) await close(out.fd).catch(() => undefined);
  }
  const path = join(spec.dir, name);
  await rename(temp, path);
  await syncDir(spec.dir);
  return { path, size: out.bytesWritten };
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

const server = createServer({ requestTimeout: 0 }, (req, res) => {
  const fail = (status: number) => {
    if (!res.headersSent) res.writeHead(status).end();
    req.resume();
  };
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers });
  } catch {
    return fail(400);
  }
  let stored: Promise<{ path: string; size: number }> | undefined;
  parser.on('file', (_name, file) => {
    if (stored) return file.resume();
    stored = store(file);
    stored.catch(() => fail(500));
  });
  parser.on('close', () => {
    if (!stored) return fail(400);
    stored.then((body) => res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify(body)), () => fail(500));
  });
  parser.on('error', () => fail(400));
  req.pipe(parser);
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}/upload` }));
});
process.on('SIGTERM', () => process.exit(0));
