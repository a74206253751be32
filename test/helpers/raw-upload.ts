// Uploads a test feeds by hand, byte by byte, to stop them at chosen points
// (hang up, keep sending while the store is down), and polling helpers.
import { randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { request, type ClientRequest } from 'node:http';
import { BOUNDARY, multipartType } from './multipart.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves with the first of `events` that `emitter` emits, removing every listener it added. */
function first(emitter: EventEmitter, ...events: string[]): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      for (const event of events) emitter.off(event, done);
      resolve();
    };
    for (const event of events) emitter.on(event, done);
  });
}

/** Reads until `done(value)` or the deadline, and returns the last value read. */
export async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 5_000): Promise<T> {
  const deadline = Date.now() + ms;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await sleep(50);
    value = await read();
  }
  return value;
}

export interface Outcome {
  /** Absent when the connection closed before any response arrived. */
  status?: number;
  body?: string;
  error?: string;
}

/** A streaming upload the test feeds by hand: the head of one file part is sent at once. */
export function startRawUpload(url: string, apiKey: string, filename: string): { req: ClientRequest; outcome: Promise<Outcome> } {
  const req = request(`${url}/api/v1/files/upload`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': multipartType() },
  });
  const outcome = new Promise<Outcome>((resolve) => {
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', (err) => resolve({ status: res.statusCode, body, error: err.message }));
    });
    req.on('error', (err) => resolve({ error: err.message }));
    req.on('close', () => resolve({ error: 'closed' }));
  });
  req.write(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\n\r\n`);
  return { req, outcome };
}

const filler = randomBytes(1024 * 1024);

/**
 * Writes `bytes` bytes of file content, honouring backpressure, and resolves
 * once the last of them is handed to the socket (or the request is gone, or
 * `stop()` says so). Returns how many bytes were written.
 */
export async function writeBytes(req: ClientRequest, bytes: number, stop: () => boolean = () => false): Promise<number> {
  let sent = 0;
  let flushed: Promise<void> = Promise.resolve();
  while (sent < bytes && !req.destroyed && !stop()) {
    const chunk = filler.subarray(0, Math.min(64 * 1024, bytes - sent));
    sent += chunk.length;
    flushed = new Promise((resolve) => req.write(chunk, () => resolve()));
    if (req.writableNeedDrain) await first(req, 'drain', 'close');
  }
  await Promise.race([flushed, first(req, 'close')]);
  return sent;
}
