// `dropstream webhooks add|list|remove|rotate-secret|deliveries`: the
// account's webhooks (issue 44) through the public API with a key that holds
// webhooks:write, one JSON line each, as the other account commands print.
import { apiClient, apiRequest } from '../api-client.js';
import { parseCommand, text, type Command } from '../args.js';

const str = { type: 'string' } as const;
const CONNECTION = { server: str, key: str };
const CONNECTION_USAGE = '[--server URL] [--key KEY]';

export const WEBHOOK_COMMANDS: Command[] = [
  {
    name: 'webhooks add',
    usage: `webhooks add <url> [--events TYPE[,TYPE...]] ${CONNECTION_USAGE}
      TYPE: file.uploaded, file.deleted, file.downloaded, link.exhausted, upload.expired (default: all)`,
    summary: 'Adds a webhook: events are POSTed to <url>, signed (Standard Webhooks); prints it with its secret, shown this once.',
    options: { ...CONNECTION, events: str },
    positionals: { min: 1, max: 1 },
  },
  { name: 'webhooks list', usage: `webhooks list ${CONNECTION_USAGE}`, summary: "Lists the account's webhooks (without secrets), oldest first.", options: CONNECTION },
  { name: 'webhooks remove', usage: `webhooks remove <webhook-id> ${CONNECTION_USAGE}`, summary: 'Removes a webhook and its undelivered messages.', options: CONNECTION, positionals: { min: 1, max: 1 } },
  {
    name: 'webhooks rotate-secret',
    usage: `webhooks rotate-secret <webhook-id> ${CONNECTION_USAGE}`,
    summary: 'Gives a webhook a new secret (printed once); the old one keeps signing alongside for 24 hours.',
    options: CONNECTION,
    positionals: { min: 1, max: 1 },
  },
  { name: 'webhooks deliveries', usage: `webhooks deliveries <webhook-id> ${CONNECTION_USAGE}`, summary: "Prints a webhook's newest deliveries: status, tries, the receiver's last answer.", options: CONNECTION, positionals: { min: 1, max: 1 } },
];

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`);
};

export async function runWebhooks(command: Command, args: string[]): Promise<void> {
  const { values, positionals } = parseCommand(command, args);
  const client = () => apiClient({ server: text(values, 'server'), key: text(values, 'key') }, process.env);
  const id = () => encodeURIComponent(positionals[0]!);
  switch (command.name) {
    case 'webhooks add': {
      const events = text(values, 'events')?.split(',').map((e) => e.trim()).filter((e) => e !== '');
      return print((await apiRequest(client(), 'POST', '/webhooks', { url: positionals[0]!, events })).webhook);
    }
    case 'webhooks list':
      return print((await apiRequest(client(), 'GET', '/webhooks')).webhooks);
    case 'webhooks remove':
      await apiRequest(client(), 'DELETE', `/webhooks/${id()}`);
      return print({ webhook_id: positionals[0]!, removed: true });
    case 'webhooks rotate-secret':
      return print((await apiRequest(client(), 'POST', `/webhooks/${id()}/rotate-secret`)).webhook);
    case 'webhooks deliveries':
      return print((await apiRequest(client(), 'GET', `/webhooks/${id()}/deliveries`)).deliveries);
    default:
      throw new Error(`no webhooks command ${command.name}`);
  }
}
