// Whether a connection to DATABASE_URL is a session of its own, as it is to
// PostgreSQL itself, or a share of one behind a connection pooler (PgBouncer
// in transaction mode, PgCat, Supavisor, RDS Proxy). What needs a session
// (migrations' advisory lock, the notice carrier's LISTEN) must not go
// through a pooler: a session-level lock taken there stays on a server
// connection another client gets next, and a LISTEN hears nothing once its
// transaction ended.
//
// There is no asking a pooler what it is. What can be seen: a setting the
// client sends at connect is refused (PgBouncer's default: "unsupported
// startup parameter") or dropped (PgBouncer told to ignore it), where
// PostgreSQL always applies it. A pooler in session mode looks the same
// from here; docs/operating.md tells its operators to set DATABASE_DIRECT_URL.

/** A statement_timeout nobody configures (1 day and 1 ms), so a server's own setting cannot pass for the one sent. */
const PROBE_MS = 86_400_001;

/** PgBouncer's FATAL for a startup parameter it does not know (08P01, protocol violation); other poolers may word it differently. */
const refusesParameter = (err: unknown) =>
  err instanceof Error && ((err as { code?: string }).code === '08P01' || /startup parameter/i.test(err.message));

/**
 * Connects to `url` with a setting for its session and asks whether it is in
 * force. False when a pooler refused or dropped it. Other failures are
 * thrown, for the caller's wait to retry or report.
 */
export async function keepsSessions(url: string, timeoutMs: number): Promise<boolean> {
  // Imported here: the embedded database needs no pg.
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, statement_timeout: PROBE_MS, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  // A connection dropped after connect surfaces on the query; nothing should reach the process.
  client.on('error', () => {});
  try {
    await client.connect();
    const { rows } = await client.query<{ setting: string }>("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'");
    return rows[0]?.setting === String(PROBE_MS);
  } catch (err) {
    if (refusesParameter(err)) return false;
    throw err;
  } finally {
    await client.end().catch(() => {});
  }
}
