// The flag parser every `dropstream` command uses: node's util.parseArgs,
// with its errors said in the command's terms. parseArgs' own text
// ("Unknown option '--emial'. To specify a positional argument starting with
// a '-' ...") names neither the command nor what was meant; here a mistake is
// "unknown option --emial for `accounts create`; did you mean --email?" and
// the command's usage, with exit code 2 (as most Unix tools exit for a usage
// error), and --help on any command prints its usage.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { CliError } from './cli-error.js';

/** A mistake in how a command was called: printed with the command's usage, exit code 2. */
export class UsageError extends CliError {
  readonly exitCode = 2;
}

/** --help was asked for: `text` goes to stdout, exit code 0. */
export class HelpShown extends Error {
  constructor(readonly text: string) {
    super('help');
  }
}

export interface Command {
  /** As typed after `dropstream`: `accounts create`. */
  name: string;
  /** Its usage line(s) after `dropstream `, options in brackets when optional. */
  usage: string;
  /** What it does, in one line, for --help. */
  summary: string;
  options: ParseArgsOptionsConfig;
  /** How many positional arguments it takes; none when absent. */
  positionals?: { min: number; max: number };
}

export const usageOf = (command: Command) => `usage: dropstream ${command.usage}`;

const helpText = (command: Command) => `${usageOf(command)}\n\n${command.summary}\n`;

/**
 * Optimal string alignment distance: edits, a swap of two neighbours
 * counting as one (`emial` is one from `email`).
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest of `candidates` to `given`, when it is close enough to be a typo (a third of its length, at least 1). */
export function closest(given: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(given, name);
    if (!best || distance < best.distance) best = { name, distance };
  }
  return best && best.distance <= Math.max(1, Math.floor(given.length / 3)) ? best.name : undefined;
}

/** The option a parseArgs error message quotes (`'--emial'`, `'--email <value>'`). */
const quotedOption = (message: string) => /'(-{1,2}[^' =]+)/.exec(message)?.[1];

/** A parseArgs error (or any ERR_PARSE_ARGS_*) in `command`'s terms. */
export function usageErrorFor(err: unknown, command: Pick<Command, 'name' | 'options'> & { usage?: string }): UsageError | undefined {
  const code = (err as { code?: string }).code;
  if (!code?.startsWith('ERR_PARSE_ARGS')) return undefined;
  const message = (err as Error).message;
  const option = quotedOption(message);
  const usage = command.usage === undefined ? '' : `\n${usageOf(command as Command)}`;
  const where = `for \`${command.name}\``;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    const names = Object.keys(command.options).concat('help');
    const guess = option.startsWith('--') ? closest(option.slice(2), names) : undefined;
    return new UsageError(`unknown option ${option} ${where}${guess ? `; did you mean --${guess}?` : ''}${usage}`);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    if (/does not take an argument/.test(message)) return new UsageError(`${option} takes no value ${where}${usage}`);
    return new UsageError(`${option} needs a value ${where}${usage}`);
  }
  return new UsageError(`${message.split('\n')[0]} ${where}${usage}`);
}

/**
 * `--grace -5` as `--grace=-5`: parseArgs refuses a value that starts with a
 * dash after a space (it could be a forgotten value followed by an option),
 * but a negative number is plainly a value, and the command's own check
 * should say what is wrong with it.
 */
function joinNegativeValues(args: string[], options: ParseArgsOptionsConfig): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    if (name && options[name]?.type === 'string' && next !== undefined && /^-[0-9.]/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** Parses `args` for `command`; throws HelpShown for --help and UsageError for any mistake. */
export function parseCommand(command: Command, args: string[]) {
  const options: ParseArgsOptionsConfig = { ...command.options, help: { type: 'boolean', short: 'h' } };
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: ParseArgsOptionsConfig; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: joinNegativeValues(args, options), options, allowPositionals: true, strict: true });
  } catch (err) {
    throw usageErrorFor(err, command) ?? err;
  }
  if (parsed.values.help) throw new HelpShown(helpText(command));
  const { min, max } = command.positionals ?? { min: 0, max: 0 };
  const count = parsed.positionals.length;
  if (count > max) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[max])} for \`${command.name}\`\n${usageOf(command)}`);
  if (count < min) throw new UsageError(`\`${command.name}\` needs ${min === 1 ? 'an argument' : `${min} arguments`}\n${usageOf(command)}`);
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}

/** A string flag's value (parseArgs types them as string | boolean). */
export const text = (values: Record<string, string | boolean | undefined>, name: string): string | undefined => {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
};

export function integer(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new CliError(`--${name} must be a whole number from 0, not ${JSON.stringify(value)}`);
  return Number(value);
}

export function boolean(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== 'true' && value !== 'false') throw new CliError(`--${name} must be true or false`);
  return value === 'true';
}

export function required(name: string, value: string | undefined): string {
  if (!value) throw new CliError(`--${name} is required`);
  return value;
}
