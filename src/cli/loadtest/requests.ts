// The loadtest's requests: bodies generated on the fly (never read from disk,
// never held whole), optionally sent or read below a rate, timed, and
// retried after Retry-After on 429 and 503 (throttle.ts) a few times while
// the run has time left.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { multipartFraming } from '../transfer.js';
import { apiUrl, responseOf, startRequest } from '../transfer-http.js';
import type { Recorder } from './recorder.js';
import { isThrottled, MAX_ATTEMPTS, retryAfterMs, type ThrottleGate } from './throttle.js';

/** One random block, repeated: random enough that no layer compresses it, cheap to make. */
const BLOCK = randomBytes(64 * 1024);
/** JSON answers are small; never keep more than this of a body. */
const TEXT_LIMIT = 64 * 1024;

export interface Target {
  server: URL;
  key: string;
  recorder: Recorder;
  /** Fires when the run ends: requests still going are given up (slow clients). */
  signal: AbortSignal;
  /** When Retry-After waits stop being worth it (the run's end). */
  deadline: number;
  /** Shared by every request of the run: where a Retry-After is waited out. */
  gate: ThrottleGate;
}

/** `size` bytes made as they are read, at most `rate` bytes per second when given. */
export function generated(size: number, recorder: Recorder, rate?: number, start = 0): Readable {
  let sent = 0;
  const began = Date.now();
  return Readable.from(
    (async function* () {
      while (sent < size) {
        const n = Math.min(size - sent, rate ? Math.max(1024, Math.min(BLOCK.length, Math.floor(rate / 4))) : BLOCK.length);
        const offset = (start + sent) % BLOCK.length;
        const chunk = offset + n <= BLOCK.length ? BLOCK.subarray(offset, offset + n) : Buffer.concat([BLOCK.subarray(offset), BLOCK.subarray(0, n - (BLOCK.length - offset))]);
        if (rate) {
          const due = began + (sent / rate) * 1000;
          if (due > Date.now()) await sleep(due - Date.now());
        }
        sent += n;
        recorder.sent(n);
        yield chunk;
      }
    })(),
    { objectMode: false },
  );
}

export interface Answer {
  status: number;
  text: string;
  bytesIn: number;
  retryAfterMs?: number;
  /** Never sent: the gate would have held it past the deadline. */
  notSent?: boolean;
}

interface Call {
  kind: string;
  method: string;
  url: URL;
  headers?: Record<string, string | number>;
  /** A body of this many bytes, with multipart framing around it when `multipart` is set. */
  body?: { size: number; multipart?: boolean; rate?: number };
  /** Read the answer at most this fast (bytes per second). */
  readRate?: number;
}

/** How long the answer to a body sent whole is still awaited once the run ends. */
const SETTLE_MS = 10_000;

/**
 * The run's signal, except that a request whose body has all been sent is
 * given SETTLE_MS more for its answer: the server may be storing the file
 * right then, and one it commits after the client hung up is a file the run
 * cannot know to delete (seen under load: a slow client's upload left on the
 * account). A request still sending is given up at once, as before.
 */
function settling(run: AbortSignal, sent: () => boolean): { signal: AbortSignal; dispose(): void } {
  const local = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    if (sent()) timer = setTimeout(() => local.abort(run.reason), SETTLE_MS);
    else local.abort(run.reason);
  };
  if (run.aborted) onAbort();
  else run.addEventListener('abort', onAbort, { once: true });
  return {
    signal: local.signal,
    dispose() {
      clearTimeout(timer);
      run.removeEventListener('abort', onAbort);
    },
  };
}

async function once(target: Target, call: Call): Promise<Answer> {
  let bodySent = false;
  const settle = settling(target.signal, () => bodySent);
  try {
    return await exchange(target, call, settle.signal, () => (bodySent = true));
  } finally {
    settle.dispose();
  }
}

async function exchange(target: Target, call: Call, signal: AbortSignal, onBodySent: () => void): Promise<Answer> {
  const { recorder } = target;
  const framing = call.body?.multipart ? multipartFraming('loadtest.bin') : undefined;
  const length = call.body ? call.body.size + (framing ? framing.head.length + framing.tail.length : 0) : 0;
  const headers: Record<string, string | number> = { Authorization: `Bearer ${target.key}`, ...call.headers };
  if (call.body) headers['Content-Length'] = length;
  if (framing) headers['Content-Type'] = framing.contentType;
  const req = startRequest(call.url, { method: call.method, headers, signal });
  const answered = responseOf(req);
  if (call.body) {
    const body = generated(call.body.size, recorder, call.body.rate);
    const framed = framing
      ? async function* (source: AsyncIterable<Buffer>) {
          yield framing.head;
          yield* source;
          yield framing.tail;
        }
      : async function* (source: AsyncIterable<Buffer>) {
          yield* source;
        };
    // The server may answer early (a refusal) and close: the answer is what counts.
    pipeline(body, framed, req).then(onBodySent, () => {});
  } else req.end();
  const res = await answered;
  const status = res.statusCode ?? 0;
  const json = /json/.test(String(res.headers['content-type']));
  const chunks: Buffer[] = [];
  let bytesIn = 0;
  const began = Date.now();
  for await (const chunk of res as AsyncIterable<Buffer>) {
    bytesIn += chunk.length;
    recorder.received(chunk.length);
    if (json && bytesIn <= TEXT_LIMIT) chunks.push(chunk);
    if (call.readRate) {
      const due = began + (bytesIn / call.readRate) * 1000;
      if (due > Date.now()) await sleep(due - Date.now(), undefined, { signal: target.signal });
    }
  }
  return { status, text: Buffer.concat(chunks).toString('utf8'), bytesIn, retryAfterMs: retryAfterMs(res.headers['retry-after'] as string | undefined) };
}

/**
 * Sends a request and records it. A 429 or 503 holds the shared gate for its
 * Retry-After and is sent again after it, up to MAX_ATTEMPTS in all, while
 * the wait ends before the deadline. Resolves with the last answer (status
 * 0: none; `notSent`: the gate kept it back past the deadline, nothing was
 * recorded).
 */
export async function send(target: Target, call: Call): Promise<Answer> {
  let answer: Answer = { status: 429, text: '', bytesIn: 0, notSent: true };
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    if (!(await target.gate.pass(target.deadline, target.signal))) return answer;
    const began = performance.now();
    try {
      answer = await once(target, call);
    } catch {
      const aborted = target.signal.aborted;
      target.recorder.record({ kind: call.kind, status: 0, ms: performance.now() - began, bytesOut: 0, bytesIn: 0, aborted });
      return { status: 0, text: '', bytesIn: 0 };
    }
    // A refused body was cut short by the answer: only an accepted one counts as sent.
    const bytesOut = answer.status >= 200 && answer.status < 300 ? (call.body?.size ?? 0) : 0;
    target.recorder.record({ kind: call.kind, status: answer.status, ms: performance.now() - began, bytesOut, bytesIn: answer.bytesIn });
    if (!isThrottled(answer.status)) return answer;
    target.gate.hold(answer.retryAfterMs);
  }
  return answer;
}

export const parsed = (answer: Answer): any => {
  try {
    return JSON.parse(answer.text);
  } catch {
    return undefined;
  }
};

/** A file the loadtest uploaded: what downloads and cleanup need. */
export interface Uploaded {
  id: number;
  /** The download path (the public link's path on this server). */
  path: string;
  size: number;
}

/** Where a public link points on the server being loaded (the link's host may be a name only the public knows). */
export const downloadPath = (link: string) => {
  const url = new URL(link);
  return url.pathname + url.search;
};

export async function plainUpload(target: Target, size: number, kind = 'upload', rate?: number): Promise<Uploaded | undefined> {
  const answer = await send(target, { kind, method: 'POST', url: apiUrl(target.server, '/api/v1/files/upload'), body: { size, multipart: true, rate } });
  const body = parsed(answer);
  if (answer.status !== 201 || typeof body?.file_id !== 'number') return undefined;
  return { id: body.file_id, path: downloadPath(body.public_link), size };
}

export async function downloadFile(target: Target, file: Uploaded, range?: number, kind = range ? 'range' : 'download', readRate?: number): Promise<void> {
  const headers: Record<string, string> = {};
  if (range) {
    const length = Math.min(range, file.size);
    const start = Math.floor(Math.random() * (file.size - length + 1));
    headers.Range = `bytes=${start}-${start + length - 1}`;
  }
  await send(target, { kind, method: 'GET', url: apiUrl(target.server, file.path), headers, readRate });
}

export async function deleteFile(target: Target, id: number): Promise<boolean> {
  const answer = await send(target, { kind: 'delete', method: 'DELETE', url: apiUrl(target.server, `/api/v1/files/${id}`) });
  return answer.status === 200 || answer.status === 404;
}
