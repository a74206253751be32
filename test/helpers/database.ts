// A migrated database for suites that test services, not HTTP: the same
// backends, settings and data folder as test/helpers/server.ts, opened as the
// server opens it (src/db/open.ts: PGlite seeded from the migrated template),
// without building the Koa apps, the relay or the sweeps, and listening on
// nothing. Accounts and plans are written by the services the admin API uses.
import { AccountService } from '../../src/accounts/service.js';
import { PlanService } from '../../src/accounts/plans.js';
import type { PrismaClient } from '../../src/db/client.js';
import { openReadyDatabase } from '../../src/db/open.js';
import type { Backend } from './databases.js';
import { prepareTestServer, ROOMY_PLAN, storeFiles } from './server.js';

export interface TestDatabase {
  prisma: PrismaClient;
  backend: Backend;
  /** The would-be server's DATA_DIR: the local store lives in `objects/` under it. */
  dataDir: string;
  /** A new account on `plan` (default: the roomy test plan), with its API key. */
  account(plan?: string): Promise<{ accountId: number; apiKey: string }>;
  /** Every object file in the local store under dataDir, excluding the temp folder. */
  objects(): Promise<string[]>;
  /** Files left in the store's temp folder. */
  tempFiles(): Promise<string[]>;
  close(): Promise<void>;
}

/** The roomy plan in the services' own terms (ROOMY_PLAN_FIELDS is the admin API's). */
const ROOMY = {
  apiAccess: true,
  requestsPerMinute: 1_000_000,
  requestsPerDay: 1_000_000,
  maxFileSize: 5368709120,
  dailyUploads: 1_000_000,
  concurrentUploads: 100_000,
};

export async function testDatabase(backend: Backend, env: Record<string, string> = {}): Promise<TestDatabase> {
  const { config, dataDir, cleanUp } = await prepareTestServer(backend, env);
  const db = await openReadyDatabase(config, () => {}).catch(async (err: unknown) => {
    await cleanUp();
    throw err;
  });
  const close = async () => {
    await db.close();
    await cleanUp();
  };
  try {
    await db.migrate();
    await new PlanService(db.prisma, { maxFileSize: Number.MAX_SAFE_INTEGER }).set(ROOMY_PLAN, ROOMY);
  } catch (err) {
    await close();
    throw err;
  }
  const accounts = new AccountService(db.prisma);
  return {
    prisma: db.prisma,
    backend,
    dataDir,
    async account(plan = ROOMY_PLAN) {
      const { accountId, apiKey } = await accounts.create({ plan });
      return { accountId, apiKey };
    },
    ...storeFiles(dataDir),
    close,
  };
}
