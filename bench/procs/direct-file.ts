// The local limit: the same bytes piped straight to files by a bare Node
// process (no HTTP, no multipart, no hash). `count` files at once.
//   node direct-file.js '{"dir","size","count"}'
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { payload, selfAccounting } from '../lib/bytes.js';

const spec = JSON.parse(process.argv[2]!) as { dir: string; size: number; count: number };
const cpu = process.cpuUsage();
const started = process.hrtime.bigint();
const paths = Array.from({ length: spec.count }, (_, i) => join(spec.dir, `direct-${process.pid}-${i}.bin`));
const seconds = await Promise.all(
  paths.map(async (path) => {
    const t0 = process.hrtime.bigint();
    await pipeline(payload(spec.size), createWriteStream(path));
    return Number(process.hrtime.bigint() - t0) / 1e9;
  }),
);
const wall = Number(process.hrtime.bigint() - started) / 1e9;
console.log(JSON.stringify({ paths, seconds, wall, ...(await selfAccounting(cpu)) }));
