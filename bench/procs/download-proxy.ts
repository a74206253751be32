// The floor of any download link served through a process of its own: a
// bare node:http server that answers GET /<key> with a GetObject of that
// key (the Range header passed on), its body piped to the response. No
// framework, no database, no rate limit, no log line. What it loses against
// a direct GetObject is the cost of the extra hop itself on this machine.
//   node download-proxy.js '{"endpoint","bucket"}'  -> {"url"}
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline, type Readable } from 'node:stream';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { s3rverClientConfig } from '../lib/s3-config.js';

const spec = JSON.parse(process.argv[2]!) as { endpoint: string; bucket: string };
const s3 = new S3Client(s3rverClientConfig(spec.endpoint));

const server = createServer((req, res) => {
  const range = req.headers.range;
  s3.send(new GetObjectCommand({ Bucket: spec.bucket, Key: decodeURIComponent(req.url!.slice(1)), Range: range }))
    .then((out) => {
      res.writeHead(range ? 206 : 200, {
        'Content-Type': 'application/octet-stream',
        'Content-Length': String(out.ContentLength),
        ...(out.ContentRange ? { 'Content-Range': out.ContentRange } : {}),
      });
      pipeline(out.Body as Readable, res, () => {});
    })
    .catch(() => {
      res.writeHead(502).end();
    });
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => process.exit(0));
