// The public API from the command line for the commands that are one request
// each (`files`, `links`): where the server is, the API key, and a JSON
// request with a deadline whose failure is one line.
import { CliError } from './cli-error.js';
import { jsonRequest } from './json-request.js';
import { apiUrl, httpUrl, networkError } from './transfer-http.js';

/** A whole request (these answer small JSON) gets this long. */
const REQUEST_TIMEOUT_MS = 60_000;

/**
 * Where the API commands send without --server: DROPSTREAM_SERVER, else the
 * server's own settings as `serve` reads them (PUBLIC_URL, else
 * http://localhost:$PORT), as the admin commands follow ADMIN_PORT. An empty
 * variable counts as unset.
 */
export const serverFrom = (env: NodeJS.ProcessEnv) => env.DROPSTREAM_SERVER || env.PUBLIC_URL || `http://localhost:${env.PORT || 3000}`;

export interface ApiClient {
  server: URL;
  key: string;
}

/** The server and key from --server/--key, else the environment; a missing key is one line saying how to give it. */
export function apiClient(flags: { server?: string; key?: string }, env: NodeJS.ProcessEnv): ApiClient {
  const server = httpUrl(flags.server || serverFrom(env), '--server');
  const key = flags.key || env.DROPSTREAM_API_KEY;
  if (!key) throw new CliError('no API key: pass --key or set DROPSTREAM_API_KEY');
  return { server, key };
}

/** Calls /api/v1`path`; resolves with the JSON answer, or throws `<status> <code>: <message>`. */
export function apiRequest(client: ApiClient, method: string, path: string, body?: unknown): Promise<Record<string, any>> {
  const url = apiUrl(client.server, `/api/v1${path}`);
  return jsonRequest({
    url,
    token: client.key,
    method,
    body,
    timeoutMs: REQUEST_TIMEOUT_MS,
    server: url.origin,
    unreachable: (err) => networkError((err as { cause?: unknown }).cause ?? err, url),
  });
}
