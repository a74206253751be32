// Raw tus requests for tests (tus-js-client is used where the point is a
// client written by others: test/tus/tus-client.test.ts).
import { request } from 'node:http';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { S3ObjectStore } from '../../src/storage/s3.js';
import { expect } from 'chai';
import { call, type ApiResponse } from './client.js';
import { eventually } from './raw-upload.js';
import type { Backend } from './databases.js';
import { startTestServer, type TestServer } from './server.js';
import type { ServerOptions } from '../../src/server.js';
import { allOpenUploads, type TestS3 } from './test-s3.js';

const MiB = 1024 * 1024;

export const TUS = { 'Tus-Resumable': '1.0.0' };
export const OCTETS = { 'Content-Type': 'application/offset+octet-stream' };

export const metadata = (fields: Record<string, string>) =>
  Object.entries(fields)
    .map(([k, v]) => `${k} ${Buffer.from(v, 'utf8').toString('base64')}`)
    .join(',');

/** POST /api/v1/uploads; `length` undefined means Upload-Defer-Length. */
export function create(
  baseUrl: string,
  key: string,
  { length, filename = 'data.bin', body, headers = {} }: { length?: number; filename?: string; body?: Buffer; headers?: Record<string, string> } = {},
): Promise<ApiResponse> {
  return call(`${baseUrl}/api/v1/uploads`, {
    method: 'POST',
    key,
    headers: {
      ...TUS,
      ...(length === undefined ? { 'Upload-Defer-Length': '1' } : { 'Upload-Length': String(length) }),
      'Upload-Metadata': metadata({ filename }),
      ...(body ? OCTETS : {}),
      ...headers,
    },
    body: body ? new Uint8Array(body) : undefined,
  });
}

/** The upload's full URL on `baseUrl` from a creation response's Location. */
export const uploadUrl = (baseUrl: string, res: ApiResponse) => baseUrl + res.headers.get('location');

/**
 * Resolves once a request holds the lease of the upload at `url` (a PATCH's
 * handler is reading its body), as the database shows it to every instance;
 * fails after five seconds. Bytes the client has already sent are then read
 * by that PATCH, also when a newer request asks it to stop (it reads what is
 * in flight before it lets go).
 */
export async function leased(t: TestServer, url: string): Promise<void> {
  const id = decodeURIComponent(new URL(url).pathname.split('/').pop()!);
  const until = () => t.server.db.prisma.resumableUpload.findUnique({ where: { id }, select: { lockedUntil: true } }).then((row) => row?.lockedUntil ?? null);
  const held = await eventually(until, (at) => at !== null && at.getTime() > Date.now());
  expect(held, `the upload ${id} is leased`).to.not.equal(null);
}

export function patch(url: string, key: string, offset: number, body: Buffer, headers: Record<string, string> = {}): Promise<ApiResponse> {
  return call(url, { method: 'PATCH', key, headers: { ...TUS, ...OCTETS, 'Upload-Offset': String(offset), ...headers }, body: new Uint8Array(body) });
}

export const head = (url: string, key: string) => call(url, { method: 'HEAD', key, headers: TUS });
export const terminate = (url: string, key: string) => call(url, { method: 'DELETE', key, headers: TUS });

/**
 * A PATCH whose body is sent in pieces by the test: `send` writes bytes,
 * `cut` destroys the connection mid-body, `end` finishes it.
 */
export const streamingPatch = (url: string, key: string, offset: number, contentLength?: number) =>
  streamingRequest(url, key, 'PATCH', { 'Upload-Offset': String(offset) }, contentLength);

/** A creation request with its body (creation-with-upload), sent in pieces as streamingPatch's. */
export const streamingCreate = (baseUrl: string, key: string, length: number, contentLength?: number) =>
  streamingRequest(`${baseUrl}/api/v1/uploads`, key, 'POST', { 'Upload-Length': String(length), 'Upload-Metadata': metadata({ filename: 'data.bin' }) }, contentLength);

function streamingRequest(url: string, key: string, method: string, headers: Record<string, string>, contentLength?: number) {
  const req = request(url, {
    method,
    headers: {
      Authorization: `Bearer ${key}`,
      ...TUS,
      ...OCTETS,
      ...headers,
      ...(contentLength === undefined ? {} : { 'Content-Length': String(contentLength) }),
    },
  });
  const response = new Promise<{ status?: number; headers?: Record<string, unknown>; body?: string }>((resolve) => {
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
      res.on('error', () => resolve({ status: res.statusCode }));
    });
    req.on('error', () => resolve({}));
  });
  return {
    send: (data: Buffer) => new Promise<void>((resolve) => (req.write(data) ? resolve() : req.once('drain', resolve))),
    cut: () => req.destroy(),
    end: (data?: Buffer) => req.end(data),
    response,
  };
}

type StoreKind = 'local' | 's3';

/** An S3 bucket's open multipart uploads (by key) and tail objects (src/storage/s3-resumable.ts), sorted. */
async function s3Leftovers(store: S3ObjectStore): Promise<string[]> {
  const uploads = (await allOpenUploads(store)).map((u) => u.key ?? u.uploadId);
  const objects = (await store.client.send(new ListObjectsV2Command({ Bucket: store.bucket }))).Contents ?? [];
  const tails = objects.map((o) => o.Key!).filter((key) => /\.tail[01]$/.test(key));
  return [...uploads, ...tails].sort();
}

/** A server on `backend` with `store`; `leftovers()` lists what the store holds of unfinished uploads. */
export async function tusServer(backend: Backend, store: StoreKind, s3: () => TestS3, env: Record<string, string> = {}, options?: ServerOptions) {
  const bucket = store === 's3' ? s3().bucket('tus') : '';
  const t = await startTestServer(backend, { ...(store === 's3' ? { ...s3().env(bucket), S3_PART_SIZE: String(5 * MiB) } : {}), ...env }, undefined, options);
  const inspect = store === 's3' ? new S3ObjectStore(s3().storeOptions(bucket, { partsInFlight: 1 })) : undefined;
  return {
    t,
    /** Temp files (local), or open multipart uploads and the `<key>.tail0/1` objects that hold their last partial part (S3). */
    leftovers: async () => (inspect ? s3Leftovers(inspect) : t.tempFiles()),
    async close() {
      await inspect?.close();
      await t.close();
    },
  };
}


/** A public link's content, fetched from the test server (200 expected). */
export async function download(t: TestServer, link: string): Promise<Buffer> {
  const res = await fetch(t.url(link));
  expect(res.status).to.equal(200);
  return Buffer.from(await res.arrayBuffer());
}

/** How many uploads on server `t` had their SHA-256 read back from the completed object (dropstream_resumable_digest_reads_total). */
export async function digestReads(t: TestServer): Promise<number> {
  const text = await t.server.metrics.registry.getSingleMetricAsString('dropstream_resumable_digest_reads_total');
  return Number(/ (\d+)$/m.exec(text)?.[1] ?? 0);
}

/** The `hash_state` bytes of the upload at `url`, as its row holds them. */
export async function hashStateOf(t: TestServer, url: string): Promise<Uint8Array | undefined> {
  const id = decodeURIComponent(new URL(url).pathname.split('/').pop()!);
  return (await t.server.db.prisma.resumableUpload.findUnique({ where: { id }, select: { hashState: true } }))?.hashState;
}
