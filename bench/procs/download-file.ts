// The floor of a download link on the local store: a bare node:http server
// that answers GET /<path under root> with fs.createReadStream piped to the
// response (one Range honoured). No framework, no database, no counting. What
// our /download on the local store loses against it is our own cost.
//   node download-file.js '{"root"}'  -> {"url"}
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream';

const spec = JSON.parse(process.argv[2]!) as { root: string };

const server = createServer((req, res) => {
  const path = join(spec.root, decodeURIComponent(req.url!.slice(1)));
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    res.writeHead(404).end();
    return;
  }
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  const [start, end] = m ? [Number(m[1]), Math.min(Number(m[2]), size - 1)] : [0, size - 1];
  res.writeHead(m ? 206 : 200, {
    'Content-Type': 'application/octet-stream',
    'Content-Length': String(end - start + 1),
    ...(m ? { 'Content-Range': `bytes ${start}-${end}/${size}` } : {}),
  });
  pipeline(createReadStream(path, { start, end }), res, () => {});
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => process.exit(0));
