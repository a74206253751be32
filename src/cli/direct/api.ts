// The routes of uploads straight to the store (docs/direct-uploads.md) as
// `dropstream upload` calls them: small JSON requests to the service, each
// with a deadline, retried with bounded back-off when the failure may pass
// (no answer, 5xx, 409 upload_busy, 429). The parts themselves go to the
// store (parts.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError } from '../cli-error.js';
import { networkReason, oneLine, responseError, responseOf, startRequest } from '../transfer-http.js';

/** `GET .../uploads/direct` when the server offers direct uploads. */
export interface DirectOffer {
  part_size: number;
  min_part_size: number;
  max_part_size: number;
  max_parts: number;
  url_seconds: number;
  expiry_seconds: number;
}

export interface PartUrl {
  part_number: number;
  size: number;
  url: string;
}

export interface StoredPart {
  part_number: number;
  size: number;
  etag: string;
}

/** The upload, as creation and `GET .../{id}` answer it. */
export interface DirectUploadState {
  upload_id: string;
  filename: string;
  size: number;
  part_size: number;
  parts: number;
  expires_at: string;
  part_urls?: PartUrl[];
  url_expires_at?: string;
  parts_stored?: StoredPart[];
}

export interface SignedParts {
  part_urls: PartUrl[];
  url_expires_at: string;
}

/** What `complete` answers: as `POST /files/upload` through the API; a receipt through a file request. */
export type Completed = Record<string, unknown>;

/** Back-off between attempts of one request, in ms: 7 attempts, about 70 s in all, then the failure stands. */
export const RETRY_DELAYS = [1_000, 2_000, 5_000, 10_000, 20_000, 30_000];

/** A JSON request gets this long, answer included. */
const REQUEST_TIMEOUT_MS = 60_000;
/** The longest Retry-After waited for. */
const MAX_RETRY_AFTER_MS = 60_000;
/** The most of an answer read. */
const ANSWER_LIMIT = 4 * 1024 * 1024;

/** A refusal the service answered: its status and code, for the callers that act on one (404 upload_not_found). */
export class DirectApiError extends CliError {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** Worth another try: no answer at all, the service or its store failing, busy, or rate limited. */
export const retryableStatus = (status: number) => status === 0 || status >= 500 || status === 409 || status === 429;

/** `2026-11-29 22:00:00` (the API's UTC dates), or an ISO time: milliseconds since the epoch; NaN when neither. */
export function wireTime(text: string | undefined): number {
  if (!text) return NaN;
  return /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(text) ? Date.parse(`${text.replace(' ', 'T')}Z`) : Date.parse(text);
}

export interface DirectApiOptions {
  /** `<server>/api/v1/uploads/direct`, or `<upload link>/uploads/direct`. */
  base: URL;
  /** `Bearer <key>`, a file request's `Basic ...`, or none. */
  authorization?: string;
  /** Ctrl-C: every request and wait ends at once. */
  signal: AbortSignal;
  /** A retry is coming after `delayMs`, for `reason`. */
  onRetry(delayMs: number, reason: string): void;
}

interface Answer {
  status: number;
  text: string;
  retryAfterMs?: number;
}

export function directApi(options: DirectApiOptions) {
  const { base, authorization, signal } = options;
  const urlOf = (path: string) => new URL(`${base.href.replace(/\/+$/, '')}${path}`);

  async function once(method: string, url: URL, body?: unknown): Promise<Answer> {
    const json = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string | number> = {};
    if (authorization) headers.Authorization = authorization;
    if (json) Object.assign(headers, { 'Content-Type': 'application/json', 'Content-Length': json.length });
    // node:http rather than fetch: fetch refuses servers on ports it deems unsafe (6000, 10080, ...).
    const req = startRequest(url, { method, headers, signal: AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]) });
    const answered = responseOf(req);
    req.end(json);
    const res = await answered;
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of res as AsyncIterable<Buffer>) {
      length += chunk.length;
      // 100 part URLs are some 60 kB; more than this is no answer of ours.
      if (length > ANSWER_LIMIT) throw new CliError(`${url.origin} answered more than ${ANSWER_LIMIT} bytes to ${method} ${url.pathname}`);
      chunks.push(chunk);
    }
    const retryAfter = Number(res.headers['retry-after']);
    return { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), retryAfterMs: retryAfter > 0 ? retryAfter * 1000 : undefined };
  }

  /** Sends until answered 2xx or a refusal that will not pass; throws a one-line CliError (a DirectApiError for a refusal). */
  async function call(method: string, path: string, body?: unknown): Promise<Record<string, any>> {
    const url = urlOf(path);
    for (let attempt = 0; ; attempt++) {
      let answer: Answer;
      try {
        answer = await once(method, url, body);
      } catch (err) {
        if (signal.aborted) throw err;
        // startRequest's idle timeout (a CliError) or our deadline (an abort): no answer.
        const reason = err instanceof CliError || (err as Error).name === 'AbortError' ? 'no answer in time' : networkReason(err);
        if (attempt >= RETRY_DELAYS.length) throw new CliError(`connection to ${url.origin} failed (${reason})`);
        await wait(RETRY_DELAYS[attempt]!, reason);
        continue;
      }
      if (answer.status >= 200 && answer.status < 300) {
        if (answer.status === 204) return {};
        try {
          return JSON.parse(answer.text) as Record<string, any>;
        } catch {
          throw new CliError(`${url.origin} answered ${answer.status} with something other than JSON: ${oneLine(answer.text.slice(0, 80))}`);
        }
      }
      // A wait of more than a minute (a day's request limit) is said, not sat out.
      if (retryableStatus(answer.status) && attempt < RETRY_DELAYS.length && (answer.retryAfterMs ?? 0) <= MAX_RETRY_AFTER_MS) {
        await wait(Math.max(RETRY_DELAYS[attempt]!, answer.retryAfterMs ?? 0), `server answered ${answer.status}`);
        continue;
      }
      throw refusal(answer);
    }
  }

  async function wait(ms: number, reason: string): Promise<void> {
    options.onRetry(ms, reason);
    await sleep(ms, undefined, { signal });
  }

  return {
    /** The offer; undefined when the server does not take uploads straight to the store (404: off, or a server from before them). */
    async offer(): Promise<DirectOffer | undefined> {
      const answer = await once('GET', urlOf(''));
      if (answer.status === 404) return undefined;
      if (answer.status !== 200) throw refusal(answer);
      return JSON.parse(answer.text) as DirectOffer;
    },
    create: (fields: Record<string, unknown>) => call('POST', '', fields) as Promise<DirectUploadState>,
    status: (id: string) => call('GET', `/${encodeURIComponent(id)}`) as Promise<DirectUploadState>,
    sign: (id: string, partNumbers: number[]) => call('POST', `/${encodeURIComponent(id)}/parts`, { part_numbers: partNumbers }) as Promise<SignedParts>,
    complete: (id: string, parts: { part_number: number; etag: string }[]) => call('POST', `/${encodeURIComponent(id)}/complete`, { parts }) as Promise<Completed>,
    abort: (id: string) => call('DELETE', `/${encodeURIComponent(id)}`),
    /** Where an upload lives, as the store of unfinished uploads keeps it. */
    urlOf: (id: string) => urlOf(`/${encodeURIComponent(id)}`),
  };
}

export type DirectApi = ReturnType<typeof directApi>;

function refusal(answer: Answer): DirectApiError {
  let code: unknown;
  try {
    code = JSON.parse(answer.text)?.error?.code;
  } catch {
    code = undefined;
  }
  return new DirectApiError(answer.status, typeof code === 'string' ? code : undefined, responseError(answer.status, answer.text).message);
}
