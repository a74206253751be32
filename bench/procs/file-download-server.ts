// The limit party of downloads from the local store: a bare node:http server
// answering GET /<name> with fs.createReadStream of `<dir>/<name>` piped to
// the response (the Range header honoured), nothing else. What our
// /download loses against it is the cost of the link, the database, the
// limits and the counting.
//   node file-download-server.js '{"dir"}'  -> {"url"}
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream';

const spec = JSON.parse(process.argv[2]!) as { dir: string };

const server = createServer((req, res) => {
  const path = join(spec.dir, decodeURIComponent(req.url!.slice(1)));
  stat(path).then(
    ({ size }) => {
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      const start = range ? Number(range[1]) : 0;
      const end = range ? Math.min(Number(range[2]), size - 1) : size - 1;
      res.writeHead(range ? 206 : 200, {
        'Content-Type': 'application/octet-stream',
        'Content-Length': String(end - start + 1),
        ...(range ? { 'Content-Range': `bytes ${start}-${end}/${size}` } : {}),
      });
      pipeline(createReadStream(path, { start, end }), res, () => {});
    },
    () => res.writeHead(404).end(),
  );
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => process.exit(0));
