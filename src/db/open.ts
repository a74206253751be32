// Opening the database as the server and `dropstream migrate` both need it:
// the backend the config names, and for PostgreSQL, one that answers (it may
// start after us: compose, Kubernetes). One place, so the two cannot drift.
import { join } from 'node:path';
import type { Config } from '../config.js';
import { openDatabase, type Database } from './client.js';
import { describeDatabase, waitForDatabase, type WaitOptions } from './wait.js';

/**
 * The database, answering. PGlite lives in DATA_DIR/pglite; PostgreSQL is
 * waited for up to DATABASE_CONNECT_TIMEOUT, and closed again when it never
 * answers, so a failed start holds no pool. Once it answers, whether
 * DATABASE_URL keeps sessions is asked too (unless DATABASE_DIRECT_URL says
 * where they are), in the same wait: a pooler that answers may not yet
 * reach PostgreSQL.
 */
export async function openReadyDatabase(
  config: Pick<Config, 'databaseUrl' | 'databaseDirectUrl' | 'dataDir' | 'databaseConnectTimeout' | 'databaseQueryTimeout'>,
  onRetry: (attempt: Parameters<WaitOptions['onRetry']>[0] & { target: string }) => void,
): Promise<Database> {
  const db = await openDatabase({
    url: config.databaseUrl,
    directUrl: config.databaseDirectUrl,
    pgliteDir: config.databaseUrl ? undefined : join(config.dataDir, 'pglite'),
    queryTimeoutMs: config.databaseQueryTimeout * 1000,
  });
  if (!config.databaseUrl) return db;
  const target = describeDatabase(config.databaseUrl);
  try {
    await waitForDatabase(async () => {
      await db.prisma.$queryRawUnsafe('SELECT 1');
      await db.sessionUrl();
    }, {
      timeoutSeconds: config.databaseConnectTimeout,
      target,
      onRetry: (attempt) => onRetry({ ...attempt, target }),
    });
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}
