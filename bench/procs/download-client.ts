// Downloads in a process of its own, reading and discarding the bytes:
//   http: GET a URL (our /download/<token> link), whole or by ranges; with
//         `follow`, a 302 is followed (to the store, for an offloaded link);
//   s3:   GetObjectCommand of the same object, straight from s3rver.
// `ranges` (inclusive [start, end] pairs) are fetched one after another on
// one kept-alive connection; without it, `repeat` whole downloads.
//   node download-client.js '{"mode","url"|"endpoint,bucket,key","ranges"?,"repeat"?}'
import { Agent, get } from 'node:http';
import type { Readable } from 'node:stream';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { selfAccounting } from '../lib/bytes.js';
import { s3rverClientConfig } from '../lib/s3-config.js';

interface Spec {
  mode: 'http' | 's3';
  url?: string;
  endpoint?: string;
  bucket?: string;
  key?: string;
  ranges?: [number, number][];
  repeat?: number;
  /** Follow a 302 (an offloaded download: the presigned URL of the store), as curl -L does. */
  follow?: boolean;
}
const spec = JSON.parse(process.argv[2]!) as Spec;

async function drain(body: Readable): Promise<number> {
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) bytes += chunk.length;
  return bytes;
}

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
/** The redirects' targets (another host: the store) get a kept-alive connection of their own, as curl -L keeps one per host. */
const storeAgent = new Agent({ keepAlive: true, maxSockets: 1 });
function httpGet(range?: [number, number], url = spec.url!, via = agent): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const headers = range ? { Range: `bytes=${range[0]}-${range[1]}` } : {};
    get(url, { agent: via, headers }, (res) => {
      const location = res.headers.location;
      if (spec.follow && res.statusCode === 302 && location) {
        drain(res).then(() => httpGet(range, new URL(location, url).toString(), storeAgent).then(resolve, reject), reject);
        return;
      }
      drain(res).then((bytes) => resolve({ status: res.statusCode!, bytes }), reject);
    }).on('error', reject);
  });
}

const s3 = spec.mode === 's3'
  ? new S3Client(s3rverClientConfig(spec.endpoint!))
  : undefined;
async function s3Get(range?: [number, number]): Promise<{ status: number; bytes: number }> {
  const res = await s3!.send(
    new GetObjectCommand({ Bucket: spec.bucket, Key: spec.key, Range: range ? `bytes=${range[0]}-${range[1]}` : undefined }),
  );
  return { status: res.$metadata.httpStatusCode!, bytes: await drain(res.Body as Readable) };
}

const fetchOne = spec.mode === 's3' ? s3Get : httpGet;
const requests: ([number, number] | undefined)[] = spec.ranges ?? Array.from({ length: spec.repeat ?? 1 }, () => undefined);
const latencies: number[] = [];
const statuses = new Set<number>();
let bytes = 0;
const cpu = process.cpuUsage();
const started = process.hrtime.bigint();
for (const range of requests) {
  const t0 = process.hrtime.bigint();
  const res = await fetchOne(range);
  latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
  statuses.add(res.status);
  bytes += res.bytes;
}
const wall = Number(process.hrtime.bigint() - started) / 1e9;
agent.destroy();
storeAgent.destroy();
s3?.destroy();
console.log(JSON.stringify({ bytes, wall, latencies_ms: latencies, statuses: [...statuses], ...(await selfAccounting(cpu)) }));
