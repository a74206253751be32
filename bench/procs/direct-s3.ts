// The S3 limit: the same bytes uploaded straight into s3rver with
// @aws-sdk/lib-storage, no service in between. Generates the bytes itself
// (as fast as lib-storage takes them) and uploads `count` objects at once.
//   node direct-s3.js '{"endpoint","bucket","prefix","size","count","partSize","queueSize"}'
import { s3rverClientConfig } from '../lib/s3-config.js';
import { S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { payload, selfAccounting } from '../lib/bytes.js';

const spec = JSON.parse(process.argv[2]!) as {
  endpoint: string;
  bucket: string;
  prefix: string;
  size: number;
  count: number;
  partSize: number;
  queueSize: number;
};
// The same client settings as the service's S3 store (src/storage/s3.ts).
const client = new S3Client(s3rverClientConfig(spec.endpoint));

const cpu = process.cpuUsage();
const started = process.hrtime.bigint();
const keys = Array.from({ length: spec.count }, (_, i) => `${spec.prefix}-${i}`);
const seconds = await Promise.all(
  keys.map(async (key) => {
    const t0 = process.hrtime.bigint();
    await new Upload({
      client,
      params: { Bucket: spec.bucket, Key: key, Body: payload(spec.size), ContentType: 'application/octet-stream' },
      partSize: spec.partSize,
      queueSize: spec.queueSize,
    }).done();
    return Number(process.hrtime.bigint() - t0) / 1e9;
  }),
);
const wall = Number(process.hrtime.bigint() - started) / 1e9;
client.destroy();
console.log(JSON.stringify({ keys, seconds, wall, ...(await selfAccounting(cpu)) }));
