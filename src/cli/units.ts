// Sizes and durations as people write them on a command line, for every
// command that takes one (`plans set --max-total-size 10GiB`, `loadtest
// --size 1MiB`): the one parser, so the commands accept the same spellings.
import { CliError } from './cli-error.js';

const UNITS: Record<string, number> = {
  '': 1, b: 1,
  k: 1024, kb: 1024, kib: 1024,
  m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2,
  g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3,
  t: 1024 ** 4, tb: 1024 ** 4, tib: 1024 ** 4,
};

/**
 * `1048576`, `64KiB`, `10MiB`, `1g`, `1.5GiB`: bytes. The units are binary
 * whichever way they are spelt (KB as KiB), as df -h and most tools that
 * take a size do; a whole number of bytes results.
 */
export function parseSize(name: string, value: string): number {
  const match = /^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$/i.exec(value.trim());
  const unit = match ? UNITS[match[2]!.toLowerCase()] : undefined;
  const bytes = match && unit !== undefined ? Math.round(Number(match[1]) * unit) : NaN;
  if (!Number.isSafeInteger(bytes)) throw new CliError(`--${name} must be a size such as 1048576, 64KiB or 10GiB, not ${JSON.stringify(value)}`);
  return bytes;
}

/** `30` (seconds), `30s`, `500ms`, `2m`: milliseconds. */
export function parseDuration(name: string, value: string): number {
  const match = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m)?$/.exec(value.trim());
  if (!match) throw new CliError(`--${name} must be a duration such as 30s, 500ms or 2m`);
  const scale = match[2] === 'ms' ? 1 : match[2] === 'm' ? 60_000 : 1000;
  return Math.round(Number(match[1]) * scale);
}

/** `3600`, `90s`, `30m`, `12h`, `7d`: whole seconds, at least 1 (expiry times, retention). */
export function parseSeconds(name: string, value: string): number {
  const match = /^([0-9]+)\s*(s|m|h|d)?$/i.exec(value.trim());
  const scale = { s: 1, m: 60, h: 3600, d: 86_400 }[(match?.[2] ?? 's').toLowerCase() as 's'];
  const seconds = match ? Number(match[1]) * scale : NaN;
  if (!Number.isSafeInteger(seconds) || seconds < 1) throw new CliError(`--${name} must be a time such as 3600, 90m, 12h or 7d, not ${JSON.stringify(value)}`);
  return seconds;
}
