// `dropstream serve` and `dropstream migrate`. They import the server and
// database modules when they run: loading Prisma and PGlite takes most of a
// second the other commands do not need.
import { loadConfig } from '../../config.js';
import { SERVICE_UMASK } from '../../data-dir.js';
import { DataDirLockedError } from '../../db/data-dir-lock.js';
import { chooseLogFormat } from '../../log-format.js';
import { dataDirError } from '../../startup-error.js';
import { tuneMemory } from '../../memory/tune.js';
import { holdYoungGeneration } from '../../memory/young-generation.js';
import { CliError } from '../cli-error.js';
import { parseCommand, text, type Command } from '../args.js';
import { checkPortsFree, nodeVersionWarning } from '../preflight.js';
import { holdProcessWarnings } from '../process-log.js';

export const SERVE: Command = {
  name: 'serve',
  usage: 'serve [--port N] [--host ADDRESS]',
  summary: 'Runs the server. --port and --host stand for PORT and HOST (and win over them); every other setting is an environment variable (docs/configuration.md).',
  options: { port: { type: 'string' }, host: { type: 'string' } },
};

export const MIGRATE: Command = {
  name: 'migrate',
  usage: 'migrate',
  summary: "Applies the database's pending migrations and prints them (serve does this itself at start).",
  options: {},
};

/** The environment with serve's flags in place of PORT and HOST: one way in for config, which checks them as it checks the variables. */
function serveEnv(args: string[]): NodeJS.ProcessEnv {
  const { values } = parseCommand(SERVE, args);
  const port = text(values, 'port');
  const host = text(values, 'host');
  if (port !== undefined && !(/^[0-9]{1,5}$/.test(port) && Number(port) <= 65_535)) throw new CliError(`--port must be a port number from 0 to 65535, not ${JSON.stringify(port)}`);
  if (host !== undefined && host.trim() === '') throw new CliError('--host must be an address such as 127.0.0.1, 0.0.0.0 or ::');
  return { ...process.env, ...(port === undefined ? {} : { PORT: port }), ...(host === undefined ? {} : { HOST: host }) };
}

export async function serve(args: string[]): Promise<void> {
  const env = serveEnv(args);
  // While the modules load; once listening, it grows with the request rate (src/memory/tune.ts).
  holdYoungGeneration();
  const config = loadConfig(env);
  // Everything the service writes is its own: files 0600, folders 0700, PGlite's too (src/data-dir.ts).
  process.umask(SERVICE_UMASK);
  const processLog = holdProcessWarnings();
  // Before the database: a taken port is one line, and nothing is migrated yet.
  await checkPortsFree([
    { variable: 'PORT', host: config.host, port: config.port },
    { variable: 'ADMIN_PORT', host: config.adminHost, port: config.adminPort },
  ]);
  const [{ createLogger }, { startServer }, { HEALTH_PATHS }] = await Promise.all([import('../../server.js'), import('../../start.js'), import('../../health/routes.js')]);
  const logger = createLogger(config.logLevel, chooseLogFormat(config.logFormat, process.stdout.isTTY));
  processLog.logTo(logger);
  const oldNode = nodeVersionWarning();
  if (oldNode) logger.warn({ node: process.version }, oldNode);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let stopTuning = () => {};
  let stopping = false;
  const stop = async (signal: string) => {
    // A second signal means "now": skip the grace period.
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal, timeout_s: config.shutdownTimeout }, 'shutting down');
    // Still starting, so nothing is served yet: stop at once (the DATA_DIR lock goes with the process).
    if (!server) process.exit(0);
    stopTuning();
    await server.close();
    process.exit(0);
  };
  // Before starting: without a handler, a SIGTERM in the instant after the
  // listeners open would kill the process without closing anything.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // A DATA_DIR the process cannot write (a bind mount owned by root, say) is
  // said in one line naming the directory and the uid to give it to.
  server = await startServer(config, logger).catch((err: unknown) => {
    throw dataDirError(err, config.dataDir) ?? err;
  });
  // Memory back after load, and the young generation's growth, follow the
  // public listener; the admin listener's scrapes and health probes are not load.
  stopTuning = tuneMemory([server.listener], {
    ignorePaths: HEALTH_PATHS,
    onCollect: (report) => logger.debug(report, 'memory collected after load'),
  });
}

export async function migrate(args: string[]): Promise<void> {
  parseCommand(MIGRATE, args);
  const config = loadConfig();
  // It writes the embedded database too: as serve does.
  process.umask(SERVICE_UMASK);
  const { openReadyDatabase } = await import('../../db/open.js');
  // As serve does: a migrate job may start before its database.
  const db = await openReadyDatabase(config, ({ attempt, reason, retryInMs, target }) =>
    process.stderr.write(`dropstream: database at ${target} not reachable (attempt ${attempt}: ${reason}), retrying in ${retryInMs} ms\n`),
  ).catch((err: unknown) => {
    if (!(err instanceof DataDirLockedError)) throw err;
    // The holder is almost always a running server, which migrated at its start.
    const { pid, hostname } = err.holder;
    throw new CliError(`cannot migrate ${err.dir}: process ${pid} on ${hostname} has it open (a running server applies migrations itself at start); stop it first`);
  });
  try {
    process.stdout.write(`${JSON.stringify({ applied: await db.migrate() })}\n`);
  } finally {
    await db.close();
  }
}
