// PostgreSQL deadlines that a connection pooler in transaction mode keeps
// (issue 58). They used to be startup parameters (statement_timeout,
// idle_in_transaction_session_timeout), which PgBouncer refuses by default
// ("unsupported startup parameter") and, told to ignore them, drops: a
// session's settings live on one server connection, and the next
// transaction may be given another. So nothing here is a session setting:
//
// - Every statement runs under a timer of this client. At the deadline it
//   sends PostgreSQL's CancelRequest (on a connection of its own, as psql's
//   Ctrl-C does; PgBouncer forwards it to the server connection running the
//   statement), and PostgreSQL cancels the statement with 57014, as
//   statement_timeout would. Nothing goes on the wire unless it fires.
// - A transaction's BEGIN carries `SET LOCAL statement_timeout` and
//   `SET LOCAL idle_in_transaction_session_timeout` in the same message (one
//   round trip, as BEGIN alone). They last until its COMMIT or ROLLBACK on
//   the server connection the transaction holds, and PostgreSQL enforces
//   them even if this process freezes: a transaction holds locks, so its
//   deadlines are the ones worth keeping on the server's side.
//
// Direct connections use the same client: one mechanism, tested both ways.
import { connect } from 'node:net';
import pg from 'pg';

/** CancelRequest's code in place of a protocol version (1234 << 16 | 5678). */
const CANCEL_REQUEST_CODE = 80877102;

export interface DeadlineOptions {
  /** How long a statement may run or wait (for a lock, for a server connection in the pooler). */
  statementMs: number;
  /** How long sending a cancel may take (connect, send, the server's close); no longer than the driver waits for an answer after the deadline. */
  cancelMs: number;
}

type Callback = (err: Error | undefined, result?: unknown) => void;
type QueryConfig = { text?: string; values?: unknown[]; name?: string; submit?: unknown };

/** Sends a CancelRequest for `client`'s running statement; resolves when the server closed it, failed, or `ms` passed. Never rejects. */
function sendCancel(client: pg.Client, ms: number): Promise<void> {
  const { processID, secretKey } = client as unknown as { processID: number | null; secretKey: number | null };
  if (processID === null || secretKey === null) return Promise.resolve();
  return new Promise((resolve) => {
    const packet = Buffer.alloc(16);
    packet.writeInt32BE(16, 0);
    packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
    packet.writeInt32BE(processID, 8);
    packet.writeInt32BE(secretKey, 12);
    // A plain connection, as libpq's PQcancel uses: pg_hba.conf does not apply to cancel requests.
    const socket = client.host.startsWith('/') ? connect(`${client.host}/.s.PGSQL.${client.port}`) : connect(client.port, client.host);
    const timer = setTimeout(() => socket.destroy(), ms);
    // Written, not ended: PgBouncer drops a cancel whose sender hangs up before it was forwarded. The server closes when done.
    socket.on('connect', () => socket.write(packet));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.resume();
  });
}

/** A transaction's BEGIN sent as a simple query (no parameters): the one message may carry more statements. */
function isPlainBegin(config: unknown, values: unknown): boolean {
  const text = typeof config === 'string' ? config : (config as QueryConfig).text;
  const params = Array.isArray(values) ? values : (config as QueryConfig).values;
  return typeof text === 'string' && /^\s*BEGIN\b[^;]*;?\s*$/i.test(text) && !(config as QueryConfig).name && !params?.length;
}

/**
 * A pg.Client class (for pg.Pool's `Client` option) whose statements have
 * deadlines no pooler drops; see the top of this file.
 */
export function clientWithDeadlines({ statementMs, cancelMs }: DeadlineOptions): typeof pg.Client {
  const local = `; SET LOCAL statement_timeout = ${statementMs}; SET LOCAL idle_in_transaction_session_timeout = ${statementMs}`;
  const withLocal = (config: unknown) => {
    const text = (typeof config === 'string' ? config : (config as QueryConfig).text!).replace(/;?\s*$/, local);
    return typeof config === 'string' ? text : { ...(config as object), text };
  };

  return class ClientWithDeadlines extends pg.Client {
    // pg's own overloads (callback or promise, text or config) all come here.
    override query(config: any, values?: any, callback?: any): any {
      // Submittables (cursors, streams) read across round trips: not ours to time.
      if (config === null || config === undefined || typeof (config as QueryConfig).submit === 'function') return super.query(config, values, callback);
      const done: Callback | undefined = typeof values === 'function' ? values : callback;
      const params = typeof values === 'function' ? undefined : values;
      const sent = isPlainBegin(config, params) ? withLocal(config) : config;
      const settle = this.deadline();
      if (done) {
        super.query(sent, params, (err: Error | undefined, result: unknown) => {
          const cancel = settle();
          if (cancel) void cancel.then(() => done(err, result));
          else done(err, result);
        });
        return undefined;
      }
      return (super.query(sent, params) as Promise<unknown>).then(
        (result) => settle()?.then(() => result) ?? result,
        (err: unknown) => {
          const cancel = settle();
          if (!cancel) throw err;
          return cancel.then(() => Promise.reject(err));
        },
      );
    }

    /**
     * Arms the statement's timer; the returned function disarms it when the
     * answer came. If a cancel went, it returns that cancel in flight: the
     * answer is handed on only once the cancel is done, so a late cancel
     * never meets the next statement this connection is given.
     */
    private deadline(): () => Promise<void> | undefined {
      let answered = false;
      let cancel: Promise<void> | undefined;
      const timer = setTimeout(() => {
        if (!answered) cancel = sendCancel(this, cancelMs);
      }, statementMs);
      return () => {
        answered = true;
        clearTimeout(timer);
        return cancel;
      };
    }
  };
}
