// `dropstream upload <path> --request <upload_link>`: sends a file through
// someone's file request (issue 45), as an outsider: no API key, the link
// is the credential (a password, when the request has one, as Basic auth).
// The file streams from disk in one multipart body (files from 64 MiB, or
// with --resumable, go through tus: resumable-upload.ts); the answer is a receipt.
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { Readable } from 'node:stream';
import { CliError } from './cli-error.js';
import { networkError, responseError } from './transfer-http.js';

/** The whole upload gets at most this long without an answer once the body is sent; the body itself has no deadline (its size is unknown). */
const ANSWER_TIMEOUT_MS = 60_000;

/** The upload link, checked (http(s), a path ending in /r/<token>), without a trailing slash. */
export function requestUploadUrl(link: string): string {
  const trimmed = link.replace(/\/+$/, '');
  let url: URL | undefined;
  try {
    url = new URL(trimmed);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || !/\/r\/[A-Za-z0-9_-]+$/.test(url.pathname)) throw new CliError(`--request must be an upload link (https://.../r/<token>), not ${JSON.stringify(link)}`);
  return trimmed;
}

export async function uploadToRequest(path: string, size: number, link: string, password: string | undefined, multipart: (filename: string) => { contentType: string; head: Buffer; tail: Buffer }): Promise<Record<string, unknown>> {
  const url = new URL(`${requestUploadUrl(link)}/files`);
  const { contentType, head, tail } = multipart(basename(path));
  const body = Readable.from(
    (async function* () {
      yield head;
      if (size > 0) yield* createReadStream(path);
      yield tail;
    })(),
  );
  const headers: Record<string, string> = { 'Content-Type': contentType, 'Content-Length': String(head.length + size + tail.length) };
  if (password !== undefined) headers.Authorization = `Basic ${Buffer.from(`:${password}`).toString('base64')}`;
  let status: number;
  let text: string;
  const deadline = new AbortController();
  try {
    const response = await fetch(url, { method: 'POST', headers, body: Readable.toWeb(body) as ReadableStream, duplex: 'half', signal: deadline.signal } as RequestInit);
    const timer = setTimeout(() => deadline.abort(), ANSWER_TIMEOUT_MS);
    try {
      text = await response.text();
    } finally {
      clearTimeout(timer);
    }
    status = response.status;
  } catch (err) {
    throw networkError((err as { cause?: unknown }).cause ?? err, url);
  }
  if (status !== 201) throw responseError(status, text);
  return JSON.parse(text) as Record<string, unknown>;
}
