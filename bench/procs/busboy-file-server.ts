// The limit party of plain uploads into the local store: a bare node:http
// server that pipes the multipart body through busboy into a file, as our
// local store does (a temp file in `<dir>/.tmp`, renamed into place, no
// fsync: the same policy as LocalObjectStore.put). No framework, no
// database, no hash, no limits, no log line. What we lose against it is
// the cost of everything that makes an upload ours.
//   node busboy-file-server.js '{"dir"}'  -> {"url"}; POST multipart -> 201 {"path","size"}
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, unlink } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import busboy from 'busboy';

const spec = JSON.parse(process.argv[2]!) as { dir: string };
const tmp = join(spec.dir, '.tmp');
await mkdir(tmp, { recursive: true });

async function store(file: Readable): Promise<{ path: string; size: number }> {
  const name = randomUUID();
  const temp = join(tmp, name);
  const out = createWriteStream(temp, { flags: 'wx', mode: 0o600 });
  try {
    await pipeline(file, out);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  const path = join(spec.dir, name);
  await rename(temp, path);
  return { path, size: out.bytesWritten };
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
