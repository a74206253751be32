import { multipartBody, multipartType, type Part } from './multipart.js';

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

type Send = (url: string, init: RequestInit) => Promise<Response>;

/**
 * Apps built without a port (helpers/built-server.ts), by the made-up origin
 * their test URLs use: call() and the helpers built on it (upload, the tus
 * and file request helpers) send there through inject, anything else with fetch.
 */
const injected = new Map<string, Send>();

/** Sends `call()`s for `origin` to `send`, until the returned function is called. */
export function injectOrigin(origin: string, send: Send): () => void {
  injected.set(origin, send);
  return () => void injected.delete(origin);
}

const sendFor = (url: string): Send => injected.get(new URL(url).origin) ?? fetch;

/** One API call with fetch (or into a built app, for its origin); the body is parsed as JSON when it is JSON. */
export const call = (url: string, init: RequestInit & { key?: string } = {}): Promise<ApiResponse> => callWith(sendFor(url), url, init);

/** One API call through `send` (fetch, or a built app's injector): the key as a bearer token, the body parsed as JSON when it is JSON. */
export async function callWith(send: (url: string, init: RequestInit) => Promise<Response>, url: string, init: RequestInit & { key?: string } = {}): Promise<ApiResponse> {
  const headers = new Headers(init.headers);
  if (init.key !== undefined) headers.set('Authorization', `Bearer ${init.key}`);
  const res = await send(url, { ...init, headers });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** POST /api/v1/files/upload with the given parts. */
export function upload(baseUrl: string, key: string, parts: Part[]): Promise<ApiResponse> {
  return call(`${baseUrl}/api/v1/files/upload`, {
    method: 'POST',
    key,
    headers: { 'Content-Type': multipartType() },
    body: multipartBody(parts),
  });
}

/** Uploads one file part named `file`. */
export const uploadFile = (baseUrl: string, key: string, filename: string, content: Buffer | string) =>
  upload(baseUrl, key, [{ name: 'file', filename, content }]);
