// Our service's upload straight to the store (issue 55), as a client does
// it: POST /api/v1/uploads/direct, the parts PUT to the URLs it signed
// (`partsInFlight` at once, the same as lib-storage's queueSize in the
// limit party), POST .../complete. Over node:http with keep-alive, as the
// SDK sends lib-storage's parts, so the two clients differ in whose API they
// call, not in their HTTP stack. The bytes are bench/lib/bytes.ts's,
// so the SHA-256 of any size is known; a part is made once and sent again (as
// lib-storage fills a buffer per part, the sender holds parts in memory).
//   node direct-upload.js '{"url","apiKey","size","count","partSize","partsInFlight"}'
import { Agent, request } from 'node:http';
import { block, MiB, selfAccounting } from '../lib/bytes.js';

const spec = JSON.parse(process.argv[2]!) as { url: string; apiKey: string; size: number; count: number; partSize: number; partsInFlight: number };
const headers = { Authorization: `Bearer ${spec.apiKey}`, 'Content-Type': 'application/json' };
// Every part starts on a MiB boundary, so each is the 1 MiB block repeated.
const part = Buffer.concat(Array.from({ length: Math.ceil(spec.partSize / MiB) }, () => block())).subarray(0, spec.partSize);

const agent = new Agent({ keepAlive: true, maxSockets: spec.partsInFlight + 1 });

/** One request with `body`; the status, the ETag header and the answer's text. */
function send(url: string, method: string, body: Buffer, headers: Record<string, string> = {}): Promise<{ status: number; etag: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers: { ...headers, 'Content-Length': String(body.length) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag ?? ''), text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function api(path: string, body: unknown): Promise<any> {
  const res = await send(`${spec.url}/api/v1/uploads/direct${path}`, 'POST', Buffer.from(JSON.stringify(body)), headers);
  if (res.status >= 300) throw new Error(`${path || 'create'}: ${res.status} ${res.text}`);
  return JSON.parse(res.text);
}

async function uploadOne(i: number): Promise<{ status: number; body: string; seconds: number }> {
  const t0 = process.hrtime.bigint();
  const created = await api('', { filename: `direct-${i}.bin`, size: spec.size, part_size: spec.partSize });
  const urls: { part_number: number; size: number; url: string }[] = [...created.part_urls];
  for (let next = urls.length + 1; next <= created.parts; next += 100) {
    const numbers = Array.from({ length: Math.min(100, created.parts - next + 1) }, (_, k) => next + k);
    urls.push(...(await api(`/${created.upload_id}/parts`, { part_numbers: numbers })).part_urls);
  }
  const etags: string[] = new Array(urls.length);
  let cursor = 0;
  await Promise.all(
    Array.from({ length: spec.partsInFlight }, async () => {
      for (let k = cursor++; k < urls.length; k = cursor++) {
        const u = urls[k]!;
        const res = await send(u.url, 'PUT', part.subarray(0, u.size));
        if (res.status !== 200) throw new Error(`part ${u.part_number}: ${res.status} ${res.text}`);
        etags[k] = res.etag;
      }
    }),
  );
  const done = await send(
    `${spec.url}/api/v1/uploads/direct/${created.upload_id}/complete`,
    'POST',
    Buffer.from(JSON.stringify({ parts: urls.map((u, k) => ({ part_number: u.part_number, etag: etags[k] })) })),
    headers,
  );
  return { status: done.status, body: done.text, seconds: Number(process.hrtime.bigint() - t0) / 1e9 };
}

const cpu = process.cpuUsage();
const started = process.hrtime.bigint();
const uploads = await Promise.all(Array.from({ length: spec.count }, (_, i) => uploadOne(i)));
const wall = Number(process.hrtime.bigint() - started) / 1e9;
agent.destroy();
console.log(JSON.stringify({ uploads, wall, ...(await selfAccounting(cpu)) }));
