// The admin commands: accounts, keys, plans and gc, through the running
// server's admin API (PGlite allows one process per database, and the API is
// the one a website's backend would use).
import { adminClientOptions, adminRequest } from '../admin-client.js';
import { CliError } from '../cli-error.js';
import { boolean, integer, parseCommand, required, text, type Command } from '../args.js';
import { parseSeconds, parseSize } from '../units.js';

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`);
};

const str = { type: 'string' } as const;
/** `gc`'s deadline: a sweep of a large store answers only when it is done. */
const GC_TIMEOUT_MS = 15 * 60_000;

export const ADMIN_COMMANDS: Command[] = [
  { name: 'accounts create', usage: 'accounts create --plan <name> [--email <email>]', summary: 'Creates an account on a plan and prints its API key (shown once).', options: { plan: str, email: str } },
  { name: 'accounts list', usage: 'accounts list [--page N] [--limit N]', summary: 'Lists accounts, oldest first (100 a page at most): plan, email, files and bytes stored.', options: { page: str, limit: str } },
  { name: 'accounts set-plan', usage: 'accounts set-plan --account <id> --plan <name>', summary: "Moves an account to another plan; its keys stay valid.", options: { account: str, plan: str } },
  { name: 'keys rotate', usage: 'keys rotate --account <id>', summary: "Revokes all of an account's API keys and prints a new one.", options: { account: str } },
  { name: 'plans list', usage: 'plans list', summary: 'Prints every plan and its limits.', options: {} },
  {
    name: 'plans set',
    usage: `plans set <name> [--api-access true|false] [--requests-per-minute N] [--requests-per-day N]
                      [--max-file-size SIZE] [--daily-uploads N] [--concurrent-uploads N|none]
                      [--max-total-size SIZE|none] [--max-expires-in TIME|none]
      SIZE: bytes, or with a unit (64KiB, 100MiB, 10GiB); TIME: seconds, or 90m, 12h, 7d`,
    summary: 'Creates or changes a plan; flags not given keep their value (a new plan starts with everything off).',
    options: Object.fromEntries(['api-access', 'requests-per-minute', 'requests-per-day', 'max-file-size', 'daily-uploads', 'concurrent-uploads', 'max-total-size', 'max-expires-in'].map((name) => [name, str])),
    positionals: { min: 1, max: 1 },
  },
  {
    name: 'gc',
    usage: 'gc [--grace SECONDS] [--check]',
    summary:
      'Removes what crashed or failed uploads and deletes left behind, and recounts file counters; --grace overrides GC_GRACE (0 after a known crash). --check removes nothing: it lists the objects in the store that no file or pending upload names and that the sweep would remove.',
    options: { grace: str, check: { type: 'boolean' } },
  },
];

/** `none` lifts a cap (null); absent leaves it as it is. */
const orNone = <T>(value: string | undefined, parse: (value: string) => T): T | null | undefined => (value === undefined ? undefined : value === 'none' ? null : parse(value));

/** Runs one of ADMIN_COMMANDS with the arguments after its name. */
export async function runAdmin(command: Command, args: string[]): Promise<void> {
  const { values, positionals } = parseCommand(command, args);
  const flag = (name: string) => text(values, name);
  // Checked before looking for a token: a bad value should not be reported as a missing token.
  const account = () => integer('account', required('account', flag('account')));
  const grace = () => {
    const value = flag('grace');
    if (value !== undefined && !/^[0-9]+$/.test(value)) throw new CliError(`--grace must be whole seconds from 0 (how old a leftover must be to go), not ${JSON.stringify(value)}`);
    return integer('grace', value);
  };
  const request = async (method: string, path: string, body?: unknown, timeoutMs?: number) =>
    adminRequest({ ...(await adminClientOptions(process.env)), timeoutMs }, method, path, body);
  switch (command.name) {
    case 'accounts create': {
      const res = await request('POST', '/admin/accounts', { plan: required('plan', flag('plan')), email: flag('email') });
      return print({ account_id: res.account_id, plan: res.plan, api_key: res.api_key });
    }
    case 'accounts list': {
      const query = new URLSearchParams();
      for (const name of ['page', 'limit']) if (flag(name) !== undefined) query.set(name, String(integer(name, flag(name))));
      const res = await request('GET', `/admin/accounts${query.size ? `?${query}` : ''}`);
      return print({ accounts: res.accounts, pagination: res.pagination });
    }
    case 'accounts set-plan': {
      const id = account();
      const res = await request('PATCH', `/admin/accounts/${id}`, { plan: required('plan', flag('plan')) });
      return print({ account_id: res.account_id, plan: res.plan });
    }
    case 'keys rotate': {
      const res = await request('POST', `/admin/accounts/${account()}/keys`);
      return print({ account_id: res.account_id, api_key: res.api_key });
    }
    case 'gc': {
      const seconds = grace();
      const body = { ...(seconds === undefined ? {} : { grace_seconds: seconds }), ...(values.check === true ? { check: true } : {}) };
      const res = await request('POST', '/admin/gc', body, GC_TIMEOUT_MS);
      if (values.check === true) return print({ checked: res.checked, orphans_total: res.orphans_total, orphans: res.orphans });
      return print({ expired: res.expired, uploads: res.uploads, deletes: res.deletes, strays: res.strays, orphans: res.orphans, failed: res.failed, counters_fixed: res.counters_fixed });
    }
    case 'plans list':
      return print((await request('GET', '/admin/plans')).plans);
    case 'plans set': {
      const body = {
        api_access: boolean('api-access', flag('api-access')),
        requests_per_minute: integer('requests-per-minute', flag('requests-per-minute')),
        requests_per_day: integer('requests-per-day', flag('requests-per-day')),
        max_file_size: flag('max-file-size') === undefined ? undefined : parseSize('max-file-size', flag('max-file-size')!),
        daily_uploads: integer('daily-uploads', flag('daily-uploads')),
        concurrent_uploads: orNone(flag('concurrent-uploads'), (value) => integer('concurrent-uploads', value)),
        max_total_size: orNone(flag('max-total-size'), (value) => parseSize('max-total-size', value)),
        max_expires_in: orNone(flag('max-expires-in'), (value) => parseSeconds('max-expires-in', value)),
      };
      const res = await request('PUT', `/admin/plans/${encodeURIComponent(positionals[0]!)}`, body);
      return print(res.plan);
    }
    default:
      throw new Error(`no admin command ${command.name}`);
  }
}
