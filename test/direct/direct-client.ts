// A client of uploads straight to the store for the suites: the API's
// calls, and the parts PUT to the URLs it signs, as any HTTP client would.
import { createHash } from 'node:crypto';
import { call, type ApiResponse } from '../helpers/client.js';

export const MiB = 1024 * 1024;
export const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

export interface PartUrl {
  part_number: number;
  size: number;
  url: string;
}

export interface DirectClient {
  info(): Promise<ApiResponse>;
  create(body: Record<string, unknown>): Promise<ApiResponse>;
  sign(id: string, partNumbers: number[]): Promise<ApiResponse>;
  view(id: string): Promise<ApiResponse>;
  complete(id: string, parts: { part_number: number; etag: string }[]): Promise<ApiResponse>;
  abort(id: string): Promise<ApiResponse>;
}

/** The routes under `base` (/api/v1/uploads/direct with `key`, or /r/{token}/uploads/direct without). */
export function directClient(base: string, key?: string): DirectClient {
  const json = (method: string, url: string, body?: unknown) =>
    call(url, { method, key, ...(body === undefined ? {} : { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }) });
  return {
    info: () => json('GET', base),
    create: (body) => json('POST', base, body),
    sign: (id, partNumbers) => json('POST', `${base}/${id}/parts`, { part_numbers: partNumbers }),
    view: (id) => json('GET', `${base}/${id}`),
    complete: (id, parts) => json('POST', `${base}/${id}/complete`, { parts }),
    abort: (id) => json('DELETE', `${base}/${id}`),
  };
}

/** PUTs `body` to a signed part URL; the store's status and the part's ETag. */
export async function putPart(url: string, body: Buffer): Promise<{ status: number; etag: string; text: string }> {
  const res = await fetch(url, { method: 'PUT', body });
  const text = await res.text();
  return { status: res.status, etag: res.headers.get('etag') ?? '', text };
}

/** Sends every part of `data` (in parallel, a few at a time) through `urls`; the parts for complete, in order. */
export async function putAll(data: Buffer, partSize: number, urls: PartUrl[]): Promise<{ part_number: number; etag: string }[]> {
  const parts: { part_number: number; etag: string }[] = [];
  for (let i = 0; i < urls.length; i += 4) {
    const batch = urls.slice(i, i + 4);
    const sent = await Promise.all(
      batch.map(async (u) => {
        const start = (u.part_number - 1) * partSize;
        const res = await putPart(u.url, data.subarray(start, start + u.size));
        if (res.status !== 200) throw new Error(`part ${u.part_number}: the store answered ${res.status} ${res.text}`);
        return { part_number: u.part_number, etag: res.etag };
      }),
    );
    parts.push(...sent);
  }
  return parts;
}

/** Creates an upload of `data`, sends all of it and completes it: the complete's answer. */
export async function uploadDirect(client: DirectClient, filename: string, data: Buffer, extra: Record<string, unknown> = {}): Promise<ApiResponse> {
  const created = await client.create({ filename, size: data.length, ...extra });
  if (created.status !== 201) return created;
  const { upload_id: id, part_size: partSize, parts: count } = created.body as { upload_id: string; part_size: number; parts: number };
  const urls = [...(created.body.part_urls as PartUrl[])];
  for (let next = urls.length + 1; next <= count; next += 100) {
    const numbers = Array.from({ length: Math.min(100, count - next + 1) }, (_, i) => next + i);
    urls.push(...((await client.sign(id, numbers)).body.part_urls as PartUrl[]));
  }
  return client.complete(id, await putAll(data, partSize, urls));
}
