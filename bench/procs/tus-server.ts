// Peer: tus-node-server (@tus/server) with @tus/s3-store, writing to the same
// s3rver. Stock settings except the S3 client's checksum mode: with the
// SDK's default, @tus/s3-store's streamed parts go out aws-chunked and
// s3rver stores the framing as data (see ENVIRONMENT.md in ../shared beside the repository), so
// the objects would be wrong; our service and the direct upload use the same
// setting. It buffers each part in a temporary file (TMPDIR). With
// `directory` instead, @tus/file-store writes into that folder (the
// resumable-cut runs).
//   node tus-server.js '{"endpoint","bucket","partSize"}'  -> {"url"}
//   node tus-server.js '{"directory"}'                     -> {"url"}
import { createServer } from 'node:http';
import { s3rverClientConfig } from '../lib/s3-config.js';
import type { AddressInfo } from 'node:net';
import { FileStore } from '@tus/file-store';
import { S3Store } from '@tus/s3-store';
import { Server } from '@tus/server';

const spec = JSON.parse(process.argv[2]!) as { endpoint: string; bucket: string; partSize: number } | { directory: string };
const tus = new Server({
  path: '/files',
  datastore:
    'directory' in spec
      ? new FileStore({ directory: spec.directory })
      : new S3Store({
          partSize: spec.partSize,
          s3ClientConfig: { bucket: spec.bucket, ...s3rverClientConfig(spec.endpoint) },
        }),
});
// No whole-request limit (Node's default cuts requests at 300 s), as in ours.
const server = createServer({ requestTimeout: 0 }, (req, res) => void tus.handle(req, res));
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}/files` }));
});
process.on('SIGTERM', () => process.exit(0));
