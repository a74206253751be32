// One small JSON request with a bearer token and a deadline, each failure one
// line: the admin commands and the API commands differ only in where they
// send and how they name the server they could not reach.
import { CliError } from './cli-error.js';
import { oneLine, responseError } from './transfer-http.js';

export interface JsonRequest {
  url: URL;
  token: string;
  method: string;
  body?: unknown;
  /** The whole request, answer included: a server that accepts and never answers must not hold the command. */
  timeoutMs: number;
  /** The server as the failure lines name it ("the admin API at http://...", or the origin). */
  server: string;
  /** The line for a connection that failed (refused, reset, unknown host). */
  unreachable(err: unknown): CliError;
}

/** Resolves with the JSON answer, or throws a CliError: `<status> <code>: <message>` for a refusal. */
export async function jsonRequest(request: JsonRequest): Promise<Record<string, any>> {
  let response: Response;
  let text: string;
  try {
    response = await fetch(request.url, {
      method: request.method,
      headers: { Authorization: `Bearer ${request.token}`, ...(request.body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      signal: AbortSignal.timeout(request.timeoutMs),
    });
    text = await response.text();
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') throw new CliError(`no answer from ${request.server} within ${request.timeoutMs / 1000} s`);
    throw request.unreachable(err);
  }
  if (!response.ok) throw responseError(response.status, text);
  try {
    return JSON.parse(text) as Record<string, any>;
  } catch {
    throw new CliError(`${request.server} answered ${response.status} with something other than JSON: ${oneLine(text.slice(0, 80))}`);
  }
}
