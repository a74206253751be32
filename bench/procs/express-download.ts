// Peer: Express + the SDK's GetObject piped to the response, the way
// Pingvin Share (NestJS on Express) and Zipline serve files kept on S3:
// GET /<key> sends a GetObject of that key (the Range header passed on) and
// pipes its body into Express's response. No database or log line, so what
// it costs beyond the bare proxy (bench/procs/download-proxy.ts) is
// Express's own request handling.
//   node express-download.js '{"endpoint","bucket"}'  -> {"url"}
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline, type Readable } from 'node:stream';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import express from 'express';
import { s3rverClientConfig } from '../lib/s3-config.js';

const spec = JSON.parse(process.argv[2]!) as { endpoint: string; bucket: string };
const s3 = new S3Client(s3rverClientConfig(spec.endpoint));
const app = express();
app.get('/:key', async (req, res) => {
  const range = req.headers.range;
  try {
    const out = await s3.send(new GetObjectCommand({ Bucket: spec.bucket, Key: req.params.key, Range: range }));
    res.status(range ? 206 : 200);
    res.set({
      'Content-Type': out.ContentType ?? 'application/octet-stream',
      'Content-Length': String(out.ContentLength),
      'Content-Disposition': 'attachment',
      ...(out.ContentRange ? { 'Content-Range': out.ContentRange, 'Accept-Ranges': 'bytes' } : {}),
    });
    pipeline(out.Body as Readable, res, () => {});
  } catch {
    res.sendStatus(502);
  }
});
const server = createServer(app);
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => process.exit(0));
