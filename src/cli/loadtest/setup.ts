// --setup: a plan of the run's own, with limits far above anything the run
// can reach, and an account on it, so the run measures the server's
// streaming path rather than the limits of whatever plan a key happens to
// be on (issue 39: on `pro`, 86% of requests were refused 429). Both are
// removed at the end through the admin API, after the run's files.
import { randomBytes } from 'node:crypto';
import { adminRequest, type AdminClientOptions } from '../admin-client.js';
import { CliError } from '../cli-error.js';
import type { LoadtestOptions } from './options.js';
import type { SetupRecord } from './summary.js';

/** Requests a minute on the load-test plan: about 16,000 a second, far above what one client machine sends. */
const PLAN_REQUESTS_PER_MINUTE = 1_000_000;
const FAR = 2_000_000_000;

export interface Provisioned {
  key: string;
  record: SetupRecord;
  /** Removes the account and then the plan; says in the record what was left and why. */
  remove(): Promise<void>;
}

export async function provision(options: LoadtestOptions): Promise<Provisioned> {
  const client: AdminClientOptions = { url: options.adminUrl!.href, token: options.adminToken! };
  const plan = `loadtest-${randomBytes(4).toString('hex')}`;
  await adminRequest(client, 'PUT', `/admin/plans/${plan}`, {
    api_access: true,
    requests_per_minute: PLAN_REQUESTS_PER_MINUTE,
    requests_per_day: FAR,
    // The run's own file size: the store's cap may be below any round "large" number.
    max_file_size: options.size,
    daily_uploads: FAR,
    concurrent_uploads: null,
    max_total_size: null,
  }).catch((err: Error) => {
    throw new CliError(`--setup could not create the load-test plan: ${err.message}`);
  });
  let account: Record<string, unknown>;
  try {
    account = await adminRequest(client, 'POST', '/admin/accounts', { plan });
  } catch (err) {
    await adminRequest(client, 'DELETE', `/admin/plans/${plan}`).catch(() => {});
    throw new CliError(`--setup could not create the load-test account: ${(err as Error).message}`);
  }
  const record: SetupRecord = { plan, accountId: account.account_id as number, removed: false };
  return {
    key: account.api_key as string,
    record,
    async remove() {
      try {
        await adminRequest(client, 'DELETE', `/admin/accounts/${record.accountId}`);
      } catch (err) {
        record.left = `left account ${record.accountId} and plan ${plan}: ${(err as Error).message}`;
        return;
      }
      try {
        await adminRequest(client, 'DELETE', `/admin/plans/${plan}`);
        record.removed = true;
      } catch (err) {
        record.left = `removed account ${record.accountId}, left plan ${plan}: ${(err as Error).message}`;
      }
    },
  };
}
