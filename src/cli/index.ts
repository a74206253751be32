// The `dropstream` command: finds the command named on the line and runs it
// (commands/ and the upload, download and loadtest modules hold them). Every
// command takes --help; a mistake in how one is called is a line saying what
// was wrong and the command's usage, with exit code 2 (args.ts).
import { ConfigError } from '../config.js';
import { StartupError } from '../startup-error.js';
import { buildInfo } from '../version.js';
import { CliError } from './cli-error.js';
import { closest, HelpShown, usageErrorFor, UsageError, type Command } from './args.js';
import { ADMIN_COMMANDS, runAdmin } from './commands/admin.js';
import { FILE_COMMANDS, runFiles } from './commands/files.js';
import { REQUEST_COMMANDS, runRequests } from './commands/requests.js';
import { AUDIT_COMMAND, KEY_COMMANDS, runAudit, runKeys } from './commands/keys.js';
import { WEBHOOK_COMMANDS, runWebhooks } from './commands/webhooks.js';
import { MIGRATE, SERVE, migrate, serve } from './commands/serve.js';
import { nodeVersionWarning } from './preflight.js';

/** The upload and download commands' specs, without loading them: they import tus-js-client, which `serve` does not need. */
async function transferCommands(): Promise<Command[]> {
  return (await import('./transfer.js')).TRANSFER_COMMANDS;
}

/** Commands of two words (`accounts create`), by their first. */
const GROUPS = ['accounts', 'keys', 'plans', 'files', 'links', 'requests', 'webhooks'];

/** The usage text; loadtest's usage is imported only when this is printed. */
async function usage(): Promise<string> {
  const { LOADTEST_USAGE } = await import('./loadtest/options.js');
  const lines = [SERVE, MIGRATE, ...ADMIN_COMMANDS, ...KEY_COMMANDS, AUDIT_COMMAND, ...WEBHOOK_COMMANDS, ...FILE_COMMANDS, ...REQUEST_COMMANDS, ...(await transferCommands())].map((command) => `  dropstream ${command.usage}`);
  return `usage:
${lines.join('\n')}
${LOADTEST_USAGE}
  dropstream <command> --help        what a command does and takes
  dropstream --version

environment (besides the server's settings, see docs/configuration.md):
  DROPSTREAM_API_KEY    API key for upload, files, links, requests, keys, audit and webhooks (or --key)
  DROPSTREAM_SERVER     server for upload, files and links (or --server); default PUBLIC_URL, else http://localhost:$PORT
  DROPSTREAM_LINK_PASSWORD  a protected link's password for download (or --password)
  ADMIN_URL             admin API for the admin commands; default http://127.0.0.1:$ADMIN_PORT
  ADMIN_TOKEN           admin token; default DATA_DIR/admin-token (DATA_DIR: the server's, default ./data)
  XDG_CACHE_HOME        where upload remembers unfinished resumable uploads (default ~/.cache; in dropstream/)`;
}

const unknownCommand = (command: string, known: string[]) => {
  const guess = closest(command, known);
  return new UsageError(`unknown command: ${command}${guess ? `; did you mean \`${guess}\`?` : ''} (see \`dropstream help\`)`);
};

/** The command `argv` names and the arguments after its name; undefined for `help`, `--version` and the like, handled by main. */
async function findCommand(argv: string[]): Promise<{ command: Command; args: string[] } | undefined> {
  const [first, second, ...rest] = argv;
  const transfers = first === 'upload' || first === 'download' ? await transferCommands() : [];
  const all = [SERVE, MIGRATE, ...ADMIN_COMMANDS, ...KEY_COMMANDS, AUDIT_COMMAND, ...WEBHOOK_COMMANDS, ...FILE_COMMANDS, ...REQUEST_COMMANDS, ...transfers];
  if (first && GROUPS.includes(first)) {
    const group = all.filter((command) => command.name.startsWith(`${first} `));
    const names = group.map((command) => command.name.slice(first.length + 1));
    const list = group.map((command) => `  dropstream ${command.usage}`).join('\n');
    if (second === '--help' || second === '-h') throw new HelpShown(`usage:\n${list}\n`);
    if (!second) throw new UsageError(`unknown command: ${first} (it needs one of: ${names.join(', ')})\nusage:\n${list}`);
    const command = group.find((c) => c.name === `${first} ${second}`);
    if (!command) throw unknownCommand(`${first} ${second}`, group.map((c) => c.name));
    return { command, args: rest };
  }
  const command = all.find((c) => c.name === first);
  return command && { command, args: argv.slice(1) };
}

/** Runs a command; resolves to true when the process should stay up (serve), false when the command is done. */
export async function main(argv: string[]): Promise<boolean> {
  const [first, ...rest] = argv;
  const oldNode = first === 'serve' ? undefined : nodeVersionWarning();
  if (oldNode) process.stderr.write(`dropstream: warning: ${oldNode}\n`);
  if (first === 'help' || first === '--help' || first === '-h') {
    process.stdout.write(`${await usage()}\n`);
    return false;
  }
  if (first === '--version' || first === 'version') {
    const { version, commit } = buildInfo();
    process.stdout.write(`dropstream ${version} (commit ${commit})\n`);
    return false;
  }
  if (first === 'loadtest') {
    // Loaded when used: the report reads uPlot from node_modules. loadtest
    // parses its own flags; its usage names them, which is enough for --help
    // and the typo hints.
    const [{ loadtest }, { LOADTEST_USAGE }] = await Promise.all([import('./loadtest/index.js'), import('./loadtest/options.js')]);
    const usageText = LOADTEST_USAGE.replace(/^\s*dropstream /, '');
    if (rest.includes('--help') || rest.includes('-h')) throw new HelpShown(`usage: dropstream ${usageText}\n`);
    const options = Object.fromEntries([...LOADTEST_USAGE.matchAll(/--([a-z0-9-]+)/g)].map((match) => [match[1]!, { type: 'string' as const }]));
    process.exitCode = await loadtest(rest).catch((err: unknown) => {
      throw usageErrorFor(err, { name: 'loadtest', options, usage: usageText }) ?? err;
    });
    return false;
  }
  if (!first) throw new UsageError(await usage());
  const found = await findCommand(argv);
  if (!found) throw unknownCommand(first, ['serve', 'migrate', 'gc', 'audit', 'upload', 'download', 'loadtest', 'help', ...GROUPS]);
  const { command, args } = found;
  if (command === SERVE) {
    await serve(args);
    return true;
  }
  if (command === MIGRATE) await migrate(args);
  else if (ADMIN_COMMANDS.includes(command)) await runAdmin(command, args);
  else if (FILE_COMMANDS.includes(command)) await runFiles(command, args);
  else if (REQUEST_COMMANDS.includes(command)) await runRequests(command, args);
  else if (KEY_COMMANDS.includes(command)) await runKeys(command, args);
  else if (command === AUDIT_COMMAND) await runAudit(args);
  else if (WEBHOOK_COMMANDS.includes(command)) await runWebhooks(command, args);
  else {
    const { transfer } = await import('./transfer.js');
    await transfer(command.name as 'upload' | 'download', args);
  }
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
    if (err instanceof HelpShown) {
      process.stdout.write(err.text);
      return exit(0);
    }
    const known = err instanceof CliError || err instanceof ConfigError || err instanceof StartupError;
    process.stderr.write(`dropstream: ${known ? (err as Error).message : String((err as Error).stack ?? err)}\n`);
    // 2: how the command was called (UsageError); 130: Ctrl-C (Interrupted); 1: anything else.
    exit((err as { exitCode?: number }).exitCode ?? 1);
  },
);
