// A built server on its two ports (Fastify's listen(), after build): the
// listeners, their connection caps and the shutdown that drains them. What
// the server is made of is src/server.ts's; tuning the process is the
// command's (src/cli/commands/serve.ts).
import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isLoopback, type Config } from './config.js';
import { acceptErrorLog, limitConnections } from './connection-cap.js';
import { createListener, drain, listen, type Drained } from './listener.js';
import { buildServer, createLogger, flushLog, type BuiltServer, type ServerOptions } from './server.js';

export interface RunningServer {
  /** Address of the public listener (the port is real when config asked for 0). */
  url: string;
  adminUrl: string;
  adminToken: string;
  db: BuiltServer['db'];
  metrics: BuiltServer['metrics'];
  /** The public listener, for what follows its requests (the memory tuning of `dropstream serve`). */
  listener: Server;
  /**
   * Graceful shutdown: stop accepting, let requests in progress finish for
   * up to SHUTDOWN_TIMEOUT (or `timeoutSeconds`), each answer saying
   * `Connection: close`, close idle keep-alive connections after
   * SHUTDOWN_IDLE_WAIT, cut the rest (their uploads are aborted and cleaned
   * up), then close store, Redis, database.
   */
  close(timeoutSeconds?: number): Promise<void>;
}

/** How long a shutdown waits, after the drain, for cut uploads to clean up. */
const CLEAN_UP_MS = 10_000;

/** Builds the server (src/server.ts) and listens on PORT and ADMIN_PORT. */
export async function startServer(
  config: Config,
  logger = createLogger(config.logLevel, config.logFormat),
  options: ServerOptions = {},
): Promise<RunningServer> {
  const built = await buildServer(config, logger, options);
  const listening: Server[] = [];
  let drainSeconds = config.shutdownTimeout;
  // Both listeners stop accepting at once and drain within one grace period;
  // cut uploads then clean up (abort, delete, give back the quota slot),
  // which needs the store and the database still open: built.close() comes after.
  const stopListening = async () => {
    built.drain();
    const drained = await Promise.all(listening.map((s) => drain(s, drainSeconds * 1000, { idleWaitMs: config.shutdownIdleWait * 1000 })));
    for (let waited = 0; built.uploadsInFlight() > 0 && waited < CLEAN_UP_MS; waited += 20) await sleep(20);
    const sum = (key: keyof Drained) => drained.reduce((total, d) => total + d[key], 0);
    logger.info(
      {
        cut_connections: sum('cut'),
        still_delivering: sum('delivering'),
        closed_idle: sum('idleClosed'),
        reset_requests: sum('resetRequests'),
        uploads_left: built.uploadsInFlight(),
      },
      'stopped',
    );
  };
  try {
    if (!isLoopback(config.adminHost)) {
      logger.warn({ adminHost: config.adminHost }, 'the admin listener is reachable from other machines: keep ADMIN_PORT off the internet (firewall, private network)');
    }
    const timeouts = { headersSeconds: config.headersTimeout, idleSeconds: config.idleTimeout };
    const server = createListener(built.app.callback(), timeouts);
    limitConnections(server, config, logger, built.metrics);
    if (config.trustProxy && config.maxConnectionsPerAddress > 0) {
      logger.info(
        { maxConnectionsPerAddress: config.maxConnectionsPerAddress },
        'MAX_CONNECTIONS_PER_ADDRESS counts connections by their peer, the proxy behind TRUST_PROXY: keep it above the connections the proxy opens, or 0 and cap clients at the proxy',
      );
    }
    const adminServer = createListener(built.adminApp.callback(), timeouts);
    const acceptFailed = acceptErrorLog(logger);
    const url = await listen(server, config.port, config.host, acceptFailed);
    listening.push(server);
    const adminUrl = await listen(adminServer, config.adminPort, config.adminHost, acceptFailed);
    listening.push(adminServer);
    logger.info({ url, adminUrl, ...built.summary }, 'dropstream listening');

    let closing: Promise<void> | undefined;
    return {
      url,
      adminUrl,
      adminToken: built.adminToken,
      db: built.db,
      metrics: built.metrics,
      listener: server,
      close(timeoutSeconds = config.shutdownTimeout) {
        // Once: a second call (a second signal, a test's clean-up) waits for the first.
        closing ??= (async () => {
          drainSeconds = timeoutSeconds;
          await stopListening().catch((err: unknown) => logger.warn({ err, closer: 'listeners' }, 'closing failed'));
          await built.close();
          await flushLog(logger);
        })();
        return closing;
      },
    };
  } catch (err) {
    // A start that fails at the second listen closes the first.
    await stopListening().catch(() => {});
    await built.close();
    throw err;
  }
}
