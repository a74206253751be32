// What the file request suites share: making a request as its owner, and
// uploading through its link as an outsider.
import { request as httpRequest } from 'node:http';
import { expect } from 'chai';
import { call, type ApiResponse } from '../helpers/client.js';
import { BOUNDARY, multipartBody, multipartType } from '../helpers/multipart.js';
import type { TestServer } from '../helpers/server.js';

/** POST /api/v1/requests as the owner of `key`; expects 201 and returns the request JSON. */
export async function newRequest(t: Pick<TestServer, 'url'>, key: string, fields: Record<string, unknown> = {}): Promise<any> {
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

export interface ThrottledOutcome {
  status?: number;
  body?: any;
  /** Bytes of the body handed to the socket when the answer came (or the connection closed). */
  sentAtAnswer: number;
  /** When the answer came (or the connection closed), Date.now(). */
  at: number;
}

/**
 * A request whose body of `size` bytes a throttled client sends at
 * `bytesPerSecond` (a piece every 100 ms), after `head` and before `tail`:
 * it stops sending once an answer comes or the connection closes.
 */
export function throttledRequest(
  url: string,
  { method = 'POST', headers, head = Buffer.alloc(0), tail = Buffer.alloc(0), size, bytesPerSecond }: { method?: string; headers: Record<string, string>; head?: Buffer; tail?: Buffer; size: number; bytesPerSecond: number },
): { outcome: Promise<ThrottledOutcome>; stop(): void } {
  const req = httpRequest(url, { method, headers: { ...headers, 'Content-Length': String(head.length + size + tail.length) } });
  let sent = 0;
  const piece = Buffer.alloc(Math.max(1, Math.round(bytesPerSecond / 10)), 7);
  let answer: { sent: number; at: number } | undefined;
  const outcome = new Promise<ThrottledOutcome>((resolve) => {
    let resolved = false;
    const done = (status?: number, text?: string) => {
      if (resolved) return;
      resolved = true;
      clearInterval(timer);
      let body: unknown = text;
      try {
        body = text === undefined ? undefined : JSON.parse(text);
      } catch {
        // not JSON: the text as it came
      }
      resolve({ status, body, sentAtAnswer: answer?.sent ?? sent, at: answer?.at ?? Date.now() });
    };
    req.on('response', (res) => {
      answer = { sent, at: Date.now() };
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => done(res.statusCode, text));
      res.on('error', () => done(res.statusCode, text));
    });
    req.on('error', () => done());
    // A close right after the answer's head: let the body's end come first.
    req.on('close', () => setTimeout(() => done(), 200));
  });
  req.write(head);
  const timer = setInterval(() => {
    if (answer || req.destroyed) return clearInterval(timer);
    const chunk = piece.subarray(0, Math.min(piece.length, size - sent));
    sent += chunk.length;
    if (sent >= size) {
      clearInterval(timer);
      req.end(Buffer.concat([chunk, tail]));
    } else req.write(chunk);
  }, 100);
  return { outcome, stop: () => req.destroy() };
}

/** A plain upload of `size` bytes through the request's link, sent by a throttled client (throttledRequest). */
export function throttledSend(baseUrl: string, request: { upload_link: string }, size: number, bytesPerSecond: number) {
  return throttledRequest(`${baseUrl}${linkPath(request)}/files`, {
    headers: { 'Content-Type': multipartType() },
    head: Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    tail: Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
    size,
    bytesPerSecond,
  });
}
