// The admin API from the command line: where it is (ADMIN_URL, the token from
// ADMIN_TOKEN or DATA_DIR's token file) and one request at a time.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { adminTokenPath } from '../admin-token.js';
import { CliError } from './cli-error.js';
import { jsonRequest } from './json-request.js';

export interface AdminClientOptions {
  /** Base URL of the admin listener. */
  url: string;
  token: string;
  /** How long one request may take, answer included (60 s): a stalled server must not hold the command forever. */
  timeoutMs?: number;
}

/** These requests answer small JSON; even a sweep (`gc`) answers within this. */
const REQUEST_TIMEOUT_MS = 60_000;

/** Where the admin API is, from the environment: ADMIN_URL, ADMIN_TOKEN, or the token file in DATA_DIR. */
export async function adminClientOptions(env: NodeJS.ProcessEnv): Promise<AdminClientOptions> {
  const url = env.ADMIN_URL || `http://127.0.0.1:${env.ADMIN_PORT || 3001}`;
  if (env.ADMIN_TOKEN) return { url, token: env.ADMIN_TOKEN };
  const path = adminTokenPath(resolve(env.DATA_DIR || './data'));
  try {
    return { url, token: (await readFile(path, 'utf8')).trim() };
  } catch (err) {
    // Said in terms of where the CLI looked and why there: run from another
    // folder, DATA_DIR's default (./data) is a folder the server never used.
    const code = (err as NodeJS.ErrnoException).code;
    const found = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? (err as Error).message})`;
    const dataDir = env.DATA_DIR ? `DATA_DIR=${env.DATA_DIR}` : 'DATA_DIR is not set: ./data of the current folder';
    throw new CliError(
      `no admin token: DATA_DIR decides where it is (DATA_DIR/admin-token, written by the server at its first start), and ${path} ${found} (${dataDir}); ` +
        `run this from the server's folder, set DATA_DIR as the server has it, or set ADMIN_TOKEN (and ADMIN_URL when the server is elsewhere)`,
    );
  }
}

/** Calls the admin API; returns the JSON body or throws a CliError with the server's code and message. */
export function adminRequest(options: AdminClientOptions, method: string, path: string, body?: unknown): Promise<Record<string, any>> {
  const server = `the admin API at ${options.url}`;
  return jsonRequest({
    url: new URL(path, options.url),
    token: options.token,
    method,
    body,
    timeoutMs: options.timeoutMs ?? REQUEST_TIMEOUT_MS,
    server,
    unreachable: (err) => {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      return new CliError(`cannot reach ${server} (${cause}): is \`dropstream serve\` running?`);
    },
  });
}
