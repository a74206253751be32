// `dropstream files ...` and `dropstream links ...`: an account's files and
// their links (issue 23) without curl, through the public API with the
// account's API key. Each prints one JSON line, as the admin commands do.
import { apiClient, apiRequest } from '../api-client.js';
import { CliError } from '../cli-error.js';
import { integer, parseCommand, text, type Command } from '../args.js';
import { parseSeconds } from '../units.js';

const str = { type: 'string' } as const;
/** Every command here talks to the API: where, and with which key. */
const CONNECTION = { server: str, key: str };
const CONNECTION_USAGE = '[--server URL] [--key KEY]';
/** A link's (or an upload's) rules, as upload and links create take them. */
export const LINK_RULE_OPTIONS = { 'expires-in': str, 'max-downloads': str, password: str };
export const LINK_RULE_USAGE = '[--expires-in TIME] [--max-downloads N] [--password PW]';

export const FILE_COMMANDS: Command[] = [
  { name: 'files list', usage: `files list [--page N] [--limit N] ${CONNECTION_USAGE}`, summary: "Lists the account's files, newest first (up to 100 a page).", options: { ...CONNECTION, page: str, limit: str } },
  { name: 'files info', usage: `files info <file-id> ${CONNECTION_USAGE}`, summary: 'Prints one file: name, size, downloads, public link, expiry.', options: CONNECTION, positionals: { min: 1, max: 1 } },
  { name: 'files delete', usage: `files delete <file-id> ${CONNECTION_USAGE}`, summary: 'Deletes a file and every link to it.', options: CONNECTION, positionals: { min: 1, max: 1 } },
  { name: 'links list', usage: `links list <file-id> ${CONNECTION_USAGE}`, summary: "Lists a file's links: the primary one (its public_link) and those made with links create.", options: CONNECTION, positionals: { min: 1, max: 1 } },
  {
    name: 'links create',
    usage: `links create <file-id> ${LINK_RULE_USAGE} ${CONNECTION_USAGE}
      TIME: seconds, or 90m, 12h, 7d`,
    summary: 'Makes another link to a file, with its own expiry, download limit and password; prints it.',
    options: { ...CONNECTION, ...LINK_RULE_OPTIONS },
    positionals: { min: 1, max: 1 },
  },
  { name: 'links revoke', usage: `links revoke <file-id> <link-id> ${CONNECTION_USAGE}`, summary: 'Revokes a link; revoking the primary link gives the file a new one.', options: CONNECTION, positionals: { min: 2, max: 2 } },
];

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`);
};

/** A file id as the API takes it (checked here too, so a typo is not a request). */
function fileId(value: string): number {
  if (!/^[0-9]{1,10}$/.test(value) || Number(value) < 1) throw new CliError(`<file-id> must be a file's number (file_id), not ${JSON.stringify(value)}`);
  return Number(value);
}

/** The rules given as flags, as the API's option fields (absent ones left out). */
export function linkRules(values: Record<string, string | boolean | undefined>): { expires_in?: number; max_downloads?: number; password?: string } {
  const rules: { expires_in?: number; max_downloads?: number; password?: string } = {};
  const expiresIn = text(values, 'expires-in');
  const maxDownloads = text(values, 'max-downloads');
  const password = text(values, 'password');
  if (expiresIn !== undefined) rules.expires_in = parseSeconds('expires-in', expiresIn);
  if (maxDownloads !== undefined) {
    const n = integer('max-downloads', maxDownloads)!;
    if (n < 1) throw new CliError('--max-downloads must be at least 1');
    rules.max_downloads = n;
  }
  if (password !== undefined) rules.password = password;
  return rules;
}

/** Runs one of FILE_COMMANDS with the arguments after its name. */
export async function runFiles(command: Command, args: string[]): Promise<void> {
  const { values, positionals } = parseCommand(command, args);
  const client = () => apiClient({ server: text(values, 'server'), key: text(values, 'key') }, process.env);
  const id = () => fileId(positionals[0]!);
  switch (command.name) {
    case 'files list': {
      const query = new URLSearchParams();
      for (const name of ['page', 'limit']) if (text(values, name) !== undefined) query.set(name, String(integer(name, text(values, name))));
      const res = await apiRequest(client(), 'GET', `/files${query.size ? `?${query}` : ''}`);
      return print({ files: res.files, pagination: res.pagination });
    }
    case 'files info':
      return print((await apiRequest(client(), 'GET', `/files/${id()}`)).file);
    case 'files delete': {
      const file = id();
      await apiRequest(client(), 'DELETE', `/files/${file}`);
      return print({ file_id: file, deleted: true });
    }
    case 'links list':
      return print((await apiRequest(client(), 'GET', `/files/${id()}/links`)).links);
    case 'links create': {
      const file = id();
      const rules = linkRules(values);
      return print((await apiRequest(client(), 'POST', `/files/${file}/links`, rules)).link);
    }
    case 'links revoke': {
      const file = id();
      const linkId = positionals[1]!;
      const { success: _, ...rest } = await apiRequest(client(), 'DELETE', `/files/${file}/links/${encodeURIComponent(linkId)}`);
      return print({ file_id: file, link_id: linkId, ...rest });
    }
    default:
      throw new Error(`no files command ${command.name}`);
  }
}
