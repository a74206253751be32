// `dropstream keys create|list|revoke` and `dropstream audit`: the account's
// own API keys and audit trail (issue 57)
// through the public API with a key that holds keys:write, one JSON line
// each, as the files, links and requests commands print. The operator's
// `dropstream keys rotate --account <id>` (admin.ts) stays: it replaces
// every key of an account, the way back in for an owner without a full key.
import { apiClient, apiRequest } from '../api-client.js';
import { CliError } from '../cli-error.js';
import { parseCommand, text, type Command } from '../args.js';
import { parseSeconds } from '../units.js';

const str = { type: 'string' } as const;
const CONNECTION = { server: str, key: str };
const CONNECTION_USAGE = '[--server URL] [--key KEY]';

export const KEY_COMMANDS: Command[] = [
  {
    name: 'keys create',
    usage: `keys create <name> --scopes SCOPE[,SCOPE...]|'*' [--expires-in TIME] [--allowed-cidrs CIDR[,CIDR...]] ${CONNECTION_USAGE}
      SCOPE: files:read, files:write, files:delete, links:write, requests:write, collections:write, webhooks:write, keys:write, stats:read, audit:read; '*': a full key`,
    summary: 'Makes an API key of your account with the scopes given (never more than the key making it), and prints it with its secret, shown this once.',
    options: { ...CONNECTION, scopes: str, 'expires-in': str, 'allowed-cidrs': str },
    positionals: { min: 1, max: 1 },
  },
  { name: 'keys list', usage: `keys list ${CONNECTION_USAGE}`, summary: "Lists your account's keys (not their secrets), newest first; `current` marks the one used.", options: CONNECTION },
  { name: 'keys revoke', usage: `keys revoke <key-id> ${CONNECTION_USAGE}`, summary: 'Revokes one of your keys, on every instance at once; the last full key without an expiry stays (the operator\'s `keys rotate` replaces all).', options: CONNECTION, positionals: { min: 1, max: 1 } },
];

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`);
};

const list = (value: string | undefined) => value?.split(',').map((item) => item.trim()).filter((item) => item !== '');

export async function runKeys(command: Command, args: string[]): Promise<void> {
  const { values, positionals } = parseCommand(command, args);
  const client = () => apiClient({ server: text(values, 'server'), key: text(values, 'key') }, process.env);
  switch (command.name) {
    case 'keys create': {
      const scopes = list(text(values, 'scopes'));
      if (!scopes?.length) throw new CliError("--scopes is required: a comma-separated list of scopes, or '*' for a full key");
      const expiresIn = text(values, 'expires-in');
      const body = {
        name: positionals[0]!,
        scopes,
        expires_in: expiresIn === undefined ? undefined : parseSeconds('expires-in', expiresIn),
        allowed_cidrs: list(text(values, 'allowed-cidrs')),
      };
      return print((await apiRequest(client(), 'POST', '/keys', body)).key);
    }
    case 'keys list':
      return print((await apiRequest(client(), 'GET', '/keys')).keys);
    case 'keys revoke': {
      const id = positionals[0]!;
      await apiRequest(client(), 'DELETE', `/keys/${encodeURIComponent(id)}`);
      return print({ key_id: id, revoked: true });
    }
    default:
      throw new Error(`no keys command ${command.name}`);
  }
}

export const AUDIT_COMMAND: Command = {
  name: 'audit',
  usage: `audit [--action ACTION] [--since TIME] [--until TIME] [--page N] [--limit N] ${CONNECTION_USAGE}
      TIME: an ISO 8601 date or time (2026-11-29, 2026-11-29T10:00:00Z)`,
  summary: "Prints your account's audit trail, newest first: what changed it, which key or file request link did it, when, from which network. Needs a key with audit:read.",
  options: { ...CONNECTION, action: str, since: str, until: str, page: str, limit: str },
};

export async function runAudit(args: string[]): Promise<void> {
  const { values } = parseCommand(AUDIT_COMMAND, args);
  const query = new URLSearchParams();
  for (const name of ['action', 'since', 'until', 'page', 'limit']) {
    const value = text(values, name);
    if (value !== undefined) query.set(name, value);
  }
  const res = await apiRequest(apiClient({ server: text(values, 'server'), key: text(values, 'key') }, process.env), 'GET', `/audit${query.size ? `?${query}` : ''}`);
  print({ events: res.events, pagination: res.pagination });
}
