// What the file request suites share: making a request as its owner, and
// uploading through its link as an outsider.
import { expect } from 'chai';
import { call, type ApiResponse } from '../helpers/client.js';
import { multipartBody, multipartType } from '../helpers/multipart.js';
import type { TestServer } from '../helpers/server.js';

/** POST /api/v1/requests as the owner of `key`; expects 201 and returns the request JSON. */
export async function newRequest(t: TestServer, key: string, fields: Record<string, unknown> = {}): Promise<any> {
  const res = await call(t.url('/api/v1/requests'), { method: 'POST', key, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(fields) });
  expect(res.status, res.text).to.equal(201);
  return res.body.request;
}

/** The path of a request's upload link (its upload_link is on PUBLIC_URL). */
export const linkPath = (request: { upload_link: string }) => new URL(request.upload_link).pathname;

/** POST /r/{token}/files with one file part, as an outsider (no key), on `baseUrl`. */
export function sendFile(baseUrl: string, request: { upload_link: string }, filename: string, content: Buffer | string, headers: Record<string, string> = {}): Promise<ApiResponse> {
  return call(`${baseUrl}${linkPath(request)}/files`, {
    method: 'POST',
    headers: { 'Content-Type': multipartType(), ...headers },
    body: new Uint8Array(multipartBody([{ name: 'file', filename, content }])),
  });
}
