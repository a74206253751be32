// The `dropstream` command. Admin commands go through the running server's
// admin API (PGlite allows one process per database, and the API is the same
// one a website's backend would use).
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { SERVICE_UMASK } from '../data-dir.js';
import { chooseLogFormat } from '../log-format.js';
import { DataDirLockedError } from '../db/data-dir-lock.js';
import { dataDirError, StartupError } from '../startup-error.js';
import { adminClientOptions, adminRequest, CliError } from './admin-client.js';
import { checkPortsFree, nodeVersionWarning } from './preflight.js';
import { holdProcessWarnings } from './process-log.js';
import { holdYoungGeneration } from '../young-generation.js';

/**
 * The usage text. The upload, download and loadtest commands (tus-js-client
 * among them) are imported only when one of them runs or this is printed,
 * not by `serve`.
 */
async function usage(): Promise<string> {
  const [{ TRANSFER_USAGE }, { LOADTEST_USAGE }] = await Promise.all([import('./transfer.js'), import('./loadtest/options.js')]);
  return `usage:
  dropstream serve
  dropstream migrate
  dropstream accounts create --plan <name> [--email <email>]
  dropstream accounts set-plan --account <id> --plan <name>
  dropstream keys rotate --account <id>
  dropstream plans list
  dropstream plans set <name> [--api-access true|false] [--requests-per-minute N]
                              [--requests-per-day N] [--max-file-size BYTES] [--daily-uploads N]
                              [--concurrent-uploads N|none] [--max-total-size BYTES|none]
                              [--max-expires-in SECONDS|none]
  dropstream gc [--grace SECONDS]     removes what crashed or failed uploads and deletes left behind; recounts file counters
${TRANSFER_USAGE}
${LOADTEST_USAGE}

environment (besides the server's settings, see docs/configuration.md):
  DROPSTREAM_API_KEY    API key for upload (or --key)
  DROPSTREAM_SERVER     server for upload (or --server); default PUBLIC_URL, else http://localhost:$PORT
  ADMIN_URL             admin API for the admin commands; default http://127.0.0.1:$ADMIN_PORT
  ADMIN_TOKEN           admin token; default DATA_DIR/admin-token`;
}

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`);
};

function integer(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new CliError(`--${name} must be a non-negative integer`);
  return Number(value);
}

function boolean(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== 'true' && value !== 'false') throw new CliError(`--${name} must be true or false`);
  return value === 'true';
}

function required(name: string, value: string | undefined): string {
  if (!value) throw new CliError(`--${name} is required`);
  return value;
}

// serve and migrate import the server and database modules when they run:
// loading Prisma and PGlite takes most of a second the admin commands do not need.
async function serve() {
  // While the modules load; once listening, the server lets it grow with the request rate (src/young-generation.ts).
  holdYoungGeneration();
  const config = loadConfig();
  // Everything the service writes is its own: files 0600, folders 0700, PGlite's too (src/data-dir.ts).
  process.umask(SERVICE_UMASK);
  const processLog = holdProcessWarnings();
  // Before the database: a taken port is one line, and nothing is migrated yet.
  await checkPortsFree([
    { variable: 'PORT', host: config.host, port: config.port },
    { variable: 'ADMIN_PORT', host: config.adminHost, port: config.adminPort },
  ]);
  const { createLogger, startServer } = await import('../server.js');
  const logger = createLogger(config.logLevel, chooseLogFormat(config.logFormat, process.stdout.isTTY));
  processLog.logTo(logger);
  const oldNode = nodeVersionWarning();
  if (oldNode) logger.warn({ node: process.version }, oldNode);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let stopping = false;
  const stop = async (signal: string) => {
    // A second signal means "now": skip the grace period.
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal, timeout_s: config.shutdownTimeout }, 'shutting down');
    // Still starting, so nothing is served yet: stop at once (the DATA_DIR lock goes with the process).
    if (!server) process.exit(0);
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
}

async function migrate() {
  const config = loadConfig();
  // It writes the embedded database too: as serve does.
  process.umask(SERVICE_UMASK);
  const { openReadyDatabase } = await import('../db/open.js');
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
    print({ applied: await db.migrate() });
  } finally {
    await db.close();
  }
}

// Errors are one line (scripts read them); `dropstream help` prints the usage.
const unknownCommand = (command: string) => new CliError(`unknown command: ${command} (see \`dropstream help\`)`);

const ADMIN_COMMANDS = ['accounts create', 'accounts set-plan', 'keys rotate', 'plans list', 'plans set', 'gc run'];

async function admin(group: string | undefined, action: string | undefined, args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      plan: { type: 'string' },
      email: { type: 'string' },
      account: { type: 'string' },
      'api-access': { type: 'string' },
      'requests-per-minute': { type: 'string' },
      'requests-per-day': { type: 'string' },
      'max-file-size': { type: 'string' },
      'daily-uploads': { type: 'string' },
      'concurrent-uploads': { type: 'string' },
      'max-total-size': { type: 'string' },
      'max-expires-in': { type: 'string' },
      grace: { type: 'string' },
    },
  });
  const command = [group, action].filter(Boolean).join(' ');
  // Before looking for a token: a typo should not be reported as a missing token.
  if (!ADMIN_COMMANDS.includes(command)) throw unknownCommand(command);
  const client = await adminClientOptions(process.env);
  const account = () => integer('account', required('account', values.account));
  switch (command) {
    case 'accounts create': {
      const res = await adminRequest(client, 'POST', '/admin/accounts', { plan: required('plan', values.plan), email: values.email });
      return print({ account_id: res.account_id, plan: res.plan, api_key: res.api_key });
    }
    case 'accounts set-plan': {
      const res = await adminRequest(client, 'PATCH', `/admin/accounts/${account()}`, { plan: required('plan', values.plan) });
      return print({ account_id: res.account_id, plan: res.plan });
    }
    case 'keys rotate': {
      const res = await adminRequest(client, 'POST', `/admin/accounts/${account()}/keys`);
      return print({ account_id: res.account_id, api_key: res.api_key });
    }
    case 'gc run': {
      const grace = integer('grace', values.grace);
      const res = await adminRequest(client, 'POST', '/admin/gc', grace === undefined ? {} : { grace_seconds: grace });
      return print({ expired: res.expired, uploads: res.uploads, deletes: res.deletes, strays: res.strays, failed: res.failed, counters_fixed: res.counters_fixed });
    }
    case 'plans list':
      return print((await adminRequest(client, 'GET', '/admin/plans')).plans);
    case 'plans set': {
      const name = positionals[0];
      if (!name) throw new CliError('plans set needs a plan name');
      const res = await adminRequest(client, 'PUT', `/admin/plans/${encodeURIComponent(name)}`, {
        api_access: boolean('api-access', values['api-access']),
        requests_per_minute: integer('requests-per-minute', values['requests-per-minute']),
        requests_per_day: integer('requests-per-day', values['requests-per-day']),
        max_file_size: integer('max-file-size', values['max-file-size']),
        daily_uploads: integer('daily-uploads', values['daily-uploads']),
        // `none` lifts the cap (null); absent leaves it as it is.
        concurrent_uploads: values['concurrent-uploads'] === 'none' ? null : integer('concurrent-uploads', values['concurrent-uploads']),
        max_total_size: values['max-total-size'] === 'none' ? null : integer('max-total-size', values['max-total-size']),
        max_expires_in: values['max-expires-in'] === 'none' ? null : integer('max-expires-in', values['max-expires-in']),
      });
      return print(res.plan);
    }
    default:
      throw unknownCommand(command);
  }
}

/** Runs a command; resolves to true when the process should stay up (serve), false when the command is done. */
export async function main(argv: string[]): Promise<boolean> {
  const [command, ...rest] = argv;
  const oldNode = command === 'serve' ? undefined : nodeVersionWarning();
  if (oldNode) process.stderr.write(`dropstream: warning: ${oldNode}\n`);
  if (command === 'serve') {
    await serve();
    return true;
  }
  if (command === 'migrate') await migrate();
  else if (command === 'accounts' || command === 'keys' || command === 'plans') await admin(command, rest[0], rest.slice(1));
  else if (command === 'gc') await admin('gc', 'run', rest);
  else if (command === 'upload' || command === 'download') {
    const { transfer } = await import('./transfer.js');
    await transfer(command, rest);
  }
  else if (command === 'loadtest') {
    // Loaded when used: the report reads uPlot from node_modules.
    const { loadtest } = await import('./loadtest/index.js');
    process.exitCode = await loadtest(rest);
  }
  else if (command === 'help' || command === '--help' || command === '-h') process.stdout.write(`${await usage()}\n`);
  else if (command) throw unknownCommand(command);
  else throw new CliError(await usage());
  return false;
}

/**
 * Exits once stdout and stderr are flushed. A finished command exits
 * explicitly rather than waiting for the event loop to drain: Prisma's
 * WebAssembly schema engine leaves a 10 s timer behind after migrating.
 */
function exit(code: number): void {
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}

main(process.argv.slice(2)).then(
  (keepRunning) => {
    if (!keepRunning) exit(Number(process.exitCode ?? 0));
  },
  (err: unknown) => {
    const known =
      err instanceof CliError ||
      err instanceof ConfigError ||
      err instanceof StartupError ||
      (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`dropstream: ${known ? (err as Error).message : String((err as Error).stack ?? err)}\n`);
    exit(1);
  },
);
