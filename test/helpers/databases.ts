// Which database backends the HTTP suites run against. PGlite always; a real
// PostgreSQL when TEST_DATABASE_URL names one (CI always does), each test
// server in a database of its own, dropped afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { notRun } from './not-run.js';

export type Backend = 'pglite' | 'postgresql';

const serverUrl = process.env.TEST_DATABASE_URL;
const howToRun = 'TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test npm test (see docs/development.md)';

if (!serverUrl) {
  if (process.env.CI) throw new Error('CI must set TEST_DATABASE_URL: the PostgreSQL half of the suite has to run there');
  notRun('TEST_DATABASE_URL is not set: the PostgreSQL half of the HTTP suites', howToRun);
}

/**
 * CI's services stage (.ci/run, TEST_SERVICES_ONLY=1) runs only what needs
 * PostgreSQL or Redis: the PGlite halves ran in its run without services.
 */
export const servicesOnly = process.env.TEST_SERVICES_ONLY === '1';
if (servicesOnly && !serverUrl) throw new Error('TEST_SERVICES_ONLY=1 runs the PostgreSQL halves: set TEST_DATABASE_URL');

export const backends: Backend[] = serverUrl ? (servicesOnly ? ['postgresql'] : ['pglite', 'postgresql']) : ['pglite'];

/** `describe(title, fn)` for a suite that only exists against PostgreSQL; without TEST_DATABASE_URL, named in the "Did not run" summary. */
export function describeWithPostgres(title: string, fn: (this: Mocha.Suite) => void): void {
  if (serverUrl) describe(title, fn);
  else notRun(`TEST_DATABASE_URL is not set: "${title}"`, howToRun);
}

async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A new, empty PostgreSQL database; returns its URL and a function that drops it. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  if (!serverUrl) throw new Error('TEST_DATABASE_URL is not set');
  const name = `dropstream_test_${randomBytes(6).toString('hex')}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  };
}
