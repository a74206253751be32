// The HTTP plumbing `dropstream upload` and `dropstream download` share
// (transfer.ts, download.ts): URLs, requests with an idle timeout, and the
// one-line errors a script can read.
import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { CliError } from './cli-error.js';

/** Ctrl-C (SIGINT): exit code 130, as a shell reports a command a SIGINT ended. */
export class Interrupted extends CliError {
  readonly exitCode = 130;
}

/**
 * Calls `onInterrupt` on Ctrl-C instead of Node's default (dying at once,
 * mid-request); returns the function that puts the default back.
 */
export function onSigint(onInterrupt: () => void): () => void {
  process.once('SIGINT', onInterrupt);
  return () => process.off('SIGINT', onInterrupt);
}

/** A connection with no traffic for this long is given up. */
const IDLE_TIMEOUT_MS = 60_000;
/** Error bodies are small JSON; never read more than this of one. */
const ERROR_BODY_LIMIT = 64 * 1024;

export const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code;

const REASONS: Record<string, string> = {
  ECONNRESET: 'connection reset',
  ECONNREFUSED: 'connection refused',
  EPIPE: 'connection broken',
  ETIMEDOUT: 'connection timed out',
  ECONNABORTED: 'connection aborted',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'name lookup failed',
  // fetch's (undici's) own codes
  UND_ERR_SOCKET: 'connection closed',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no answer in time',
};

/** Why a connection failed, in a few words (`connection reset`); fetch's errors carry the socket's in `cause`. */
export function networkReason(err: unknown): string {
  const cause = ((err as { cause?: unknown })?.cause ?? err) as NodeJS.ErrnoException;
  return (cause?.code && REASONS[cause.code]) ?? cause?.code ?? cause?.message ?? 'request failed';
}

/** Server-controlled text, made safe for our one-line error format. */
export const oneLine = (text: string) => text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();

export function httpUrl(value: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`${what} is not a URL: ${oneLine(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`${what} must be an http or https URL`);
  return url;
}

/** An API path under the server URL (which may have a path of its own, behind a proxy). */
export const apiUrl = (server: URL, path: string) => new URL(`${server.href.replace(/\/+$/, '')}${path}`);

export function startRequest(url: URL, options: http.RequestOptions): ClientRequest {
  const req = (url.protocol === 'https:' ? https : http).request(url, options);
  req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new CliError(`no response from ${url.origin} for ${IDLE_TIMEOUT_MS / 1000} s`)));
  return req;
}

export function responseOf(req: ClientRequest): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    req.once('response', resolve);
    req.on('error', reject);
  });
}

export async function readBody(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    length += chunk.length;
    if (length > ERROR_BODY_LIMIT) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `<status> <code>: <message>` from the API's error body, or the status text when the body is not ours (a proxy's page). */
export function responseError(status: number, body: string): CliError {
  let error: { code?: unknown; message?: unknown } | undefined;
  try {
    error = JSON.parse(body)?.error;
  } catch {
    error = undefined;
  }
  if (typeof error?.code === 'string') {
    return new CliError(oneLine(`${status} ${error.code}: ${typeof error.message === 'string' ? error.message : ''}`));
  }
  return new CliError(`${status} ${http.STATUS_CODES[status] ?? 'unexpected response'}`);
}

export function networkError(err: unknown, url: URL): CliError {
  if (err instanceof CliError) return err;
  return new CliError(`connection to ${url.origin} failed (${errno(err) ?? oneLine((err as Error).message)})`);
}
