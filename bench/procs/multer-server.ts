// Peer: Express + multer + multer-s3 (which streams each file into
// @aws-sdk/lib-storage's Upload with its defaults: 5 MiB parts, 4 at once),
// writing to the same s3rver with the same S3 client settings as ours.
//   node multer-server.js '{"endpoint","bucket"}'  -> {"url"}
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { s3rverClientConfig } from '../lib/s3-config.js';
import { S3Client } from '@aws-sdk/client-s3';
import express from 'express';
import multer from 'multer';
import multerS3 from 'multer-s3';

const spec = JSON.parse(process.argv[2]!) as { endpoint: string; bucket: string };
const s3 = new S3Client(s3rverClientConfig(spec.endpoint));
const upload = multer({ storage: multerS3({ s3, bucket: spec.bucket, key: (_req, _file, cb) => cb(null, randomUUID()) }) });
const app = express();
app.post('/upload', upload.single('file'), (req, res) => {
  const file = req.file as Express.MulterS3.File;
  res.status(201).json({ key: file.key, size: file.size });
});
const server = createServer({ requestTimeout: 0 }, app);
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}/upload` }));
});
process.on('SIGTERM', () => process.exit(0));
