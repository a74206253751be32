// `dropstream requests ...`: the account's file requests (issue 45) through
// the public API with the account's API key, one JSON line each, as the
// files and links commands print.
import { apiClient, apiRequest } from '../api-client.js';
import { CliError } from '../cli-error.js';
import { integer, parseCommand, text, type Command } from '../args.js';
import { parseSeconds } from '../units.js';

const str = { type: 'string' } as const;
const CONNECTION = { server: str, key: str };
const CONNECTION_USAGE = '[--server URL] [--key KEY]';

export const REQUEST_COMMANDS: Command[] = [
  {
    name: 'requests create',
    usage: `requests create [--title TEXT] [--max-files N|none] [--max-file-size BYTES] [--expires-in TIME|never] [--password PW] ${CONNECTION_USAGE}`,
    summary: 'Makes a file request: a link through which people without an account upload into yours; prints it with its upload_link. Without --max-files it takes 10 files, without --expires-in it is open 7 days; none and never lift them.',
    options: { ...CONNECTION, title: str, 'max-files': str, 'max-file-size': str, 'expires-in': str, password: str },
  },
  { name: 'requests list', usage: `requests list [--page N] [--limit N] ${CONNECTION_USAGE}`, summary: "Lists the account's open file requests, newest first.", options: { ...CONNECTION, page: str, limit: str } },
  { name: 'requests close', usage: `requests close <request-id> ${CONNECTION_USAGE}`, summary: 'Closes a file request: its link answers 404; the files it received stay.', options: CONNECTION, positionals: { min: 1, max: 1 } },
];

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`);
};

function positive(name: string, value: string | undefined): number | undefined {
  const n = integer(name, value);
  if (n !== undefined && n < 1) throw new CliError(`--${name} must be at least 1`);
  return n;
}

export async function runRequests(command: Command, args: string[]): Promise<void> {
  const { values, positionals } = parseCommand(command, args);
  const client = () => apiClient({ server: text(values, 'server'), key: text(values, 'key') }, process.env);
  switch (command.name) {
    case 'requests create': {
      const expiresIn = text(values, 'expires-in');
      const maxFiles = text(values, 'max-files');
      // null asks the server for no limit; absent, it applies its defaults (10 files, 7 days).
      const body = {
        title: text(values, 'title'),
        max_files: maxFiles === 'none' ? null : positive('max-files', maxFiles),
        max_file_size: positive('max-file-size', text(values, 'max-file-size')),
        expires_in: expiresIn === undefined ? undefined : expiresIn === 'never' ? null : parseSeconds('expires-in', expiresIn),
        password: text(values, 'password'),
      };
      return print((await apiRequest(client(), 'POST', '/requests', body)).request);
    }
    case 'requests list': {
      const query = new URLSearchParams();
      for (const name of ['page', 'limit']) if (text(values, name) !== undefined) query.set(name, String(integer(name, text(values, name))));
      const res = await apiRequest(client(), 'GET', `/requests${query.size ? `?${query}` : ''}`);
      return print({ requests: res.requests, pagination: res.pagination });
    }
    case 'requests close': {
      const id = positionals[0]!;
      await apiRequest(client(), 'DELETE', `/requests/${encodeURIComponent(id)}`);
      return print({ request_id: id, closed: true });
    }
    default:
      throw new Error(`no requests command ${command.name}`);
  }
}
