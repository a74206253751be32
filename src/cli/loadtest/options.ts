// `dropstream loadtest` arguments: parsed and checked once, before any load
// is sent, so a typo costs nothing on the server.
import { parseArgs } from 'node:util';
import { CliError } from '../cli-error.js';
import { httpUrl } from '../transfer-http.js';
import { parseDuration, parseSize } from '../units.js';

export const SCENARIOS = ['uploads', 'resumable', 'direct', 'downloads', 'metadata', 'slow', 'mixed'] as const;
export type Scenario = (typeof SCENARIOS)[number];
/** What the mixed scenario draws from, by weight. */
export type MixKind = 'uploads' | 'resumable' | 'direct' | 'downloads' | 'metadata';

export interface LoadtestOptions {
  scenario: Scenario;
  server: URL;
  /** Empty with `setup`: the run's own account's key replaces it. */
  key: string;
  /** Run on a plan and account of its own, made and removed through the admin API (setup.ts). */
  setup: boolean;
  adminUrl?: URL;
  adminToken?: string;
  concurrency: number;
  /** Bytes per uploaded file. */
  size: number;
  /** Operations in all (uploads, downloads, metadata requests); the run also stops at `durationMs`. */
  count: number;
  durationMs: number;
  /** resumable: the loadtest's own proxy cuts each connection after this many bytes from the client. */
  cutEvery?: number;
  /** downloads: fetch this many bytes at a random offset instead of the whole file. */
  range?: number;
  /** metadata: requests per second across all workers. */
  rate: number;
  /** Slow clients running beside the scenario, sending or reading at `slowRate` bytes per second. */
  slowClients: number;
  slowRate: number;
  mix: Record<MixKind, number>;
  /** --mix was given: its weights stand; otherwise direct gets a share when the server offers it (scenarios.ts). */
  mixGiven: boolean;
  keep: boolean;
  /** The one-line live status on stderr (default: when stderr is a terminal). */
  progress: boolean;
  json?: string;
  report?: string;
  maxP99Ms?: number;
  maxRssMib?: number;
  maxErrorRate?: number;
  maxThrottledRate?: number;
}

export const LOADTEST_USAGE = `  dropstream loadtest <uploads|resumable|direct|downloads|metadata|slow|mixed> --server URL (--key KEY | --setup)
      [--admin-url URL --admin-token T] [--concurrency N] [--size S] [--count C] [--duration D]
      [--cut-every BYTES] [--range BYTES] [--rate PER_S] [--slow-clients M] [--slow-rate BYTES_PER_S]
      [--mix uploads=3,resumable=1,direct=1,downloads=4,metadata=2] [--keep] [--progress|--quiet]
      [--json FILE|-] [--report FILE] [--max-p99-ms MS] [--max-rss-mib MIB] [--max-error-rate FRACTION]
      [--max-throttled-rate FRACTION]
  dropstream loadtest compare A.json B.json [--report DIFF.html]`;

// The size and duration parsers are the CLI's (src/cli/units.ts), so every command spells sizes alike.
export { parseDuration, parseSize } from '../units.js';

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(value) || !(n > 0)) throw new CliError(`--${name} must be a positive number`);
  return n;
}

function fraction(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^[0-9.]+$/.test(value) || !(n >= 0 && n <= 1)) throw new CliError(`--${name} must be a fraction between 0 and 1`);
  return n;
}

function parseMix(value: string | undefined): Record<MixKind, number> {
  // direct: 0 until the server is known to offer it (scenarios.ts gives it 1 then, unless --mix says otherwise).
  const mix: Record<MixKind, number> = { uploads: 3, resumable: 1, direct: 0, downloads: 4, metadata: 2 };
  if (value === undefined) return mix;
  for (const kind of Object.keys(mix) as MixKind[]) mix[kind] = 0;
  for (const part of value.split(',')) {
    const [kind, weight] = part.split('=');
    if (!kind || !(kind in mix) || weight === undefined || !/^[0-9]+$/.test(weight)) {
      throw new CliError('--mix must look like uploads=3,resumable=1,direct=1,downloads=4,metadata=2');
    }
    mix[kind as MixKind] = Number(weight);
  }
  if (Object.values(mix).every((w) => w === 0)) throw new CliError('--mix needs a weight above 0');
  return mix;
}

export function parseLoadtestArgs(args: string[], env: NodeJS.ProcessEnv): LoadtestOptions {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: Object.fromEntries(
      ['server', 'key', 'admin-url', 'admin-token', 'concurrency', 'size', 'count', 'duration', 'cut-every', 'range', 'rate', 'slow-clients', 'slow-rate', 'mix', 'json', 'report', 'max-p99-ms', 'max-rss-mib', 'max-error-rate', 'max-throttled-rate']
        .map((name) => [name, { type: 'string' as const }])
        .concat(['keep', 'progress', 'quiet', 'setup'].map((name) => [name, { type: 'boolean' as const }]) as never),
    ) as Record<string, { type: 'string' } | { type: 'boolean' }>,
  });
  const v = values as Record<string, string | undefined> & { keep?: boolean; progress?: boolean; quiet?: boolean; setup?: boolean };
  const scenario = positionals[0] as Scenario;
  if (!SCENARIOS.includes(scenario) || positionals.length > 1) throw new CliError(`usage:\n${LOADTEST_USAGE}`);
  const serverValue = v.server || env.DROPSTREAM_SERVER;
  if (!serverValue) throw new CliError('--server is required (the server to load)');
  const key = v.key || env.DROPSTREAM_API_KEY;
  const adminToken = v['admin-token'] || env.ADMIN_TOKEN;
  const adminUrl = v['admin-url'] ? httpUrl(v['admin-url'], '--admin-url') : undefined;
  if (adminUrl && !adminToken) throw new CliError('--admin-url needs --admin-token (or ADMIN_TOKEN) to scrape /metrics');
  if (v.setup && key) throw new CliError('--setup runs on an account of its own: leave out --key (and DROPSTREAM_API_KEY)');
  if (v.setup && !adminUrl) throw new CliError('--setup needs --admin-url and --admin-token (it creates a plan and an account)');
  // With admin access and no key, a plan and account of the run's own is the default.
  const setup = !key && adminUrl !== undefined;
  if (!key && !setup) throw new CliError('no API key: pass --key (or set DROPSTREAM_API_KEY), or --setup with --admin-url and --admin-token');
  if (setup && v.keep) throw new CliError('--keep cannot go with --setup: the run\'s account is removed at the end, with its files');
  if (v.quiet && v.progress) throw new CliError('--quiet and --progress contradict each other: pick one');
  const errorRate = fraction('max-error-rate', v['max-error-rate']);
  const throttledRate = fraction('max-throttled-rate', v['max-throttled-rate']);
  return {
    scenario,
    server: httpUrl(serverValue, '--server'),
    key: key ?? '',
    setup,
    adminUrl,
    adminToken,
    concurrency: Math.floor(positive('concurrency', v.concurrency, 4)),
    size: v.size === undefined ? 1024 * 1024 : parseSize('size', v.size),
    count: Math.floor(positive('count', v.count, 100)),
    durationMs: v.duration === undefined ? 60_000 : parseDuration('duration', v.duration),
    cutEvery: v['cut-every'] === undefined ? undefined : parseSize('cut-every', v['cut-every']),
    range: v.range === undefined ? undefined : parseSize('range', v.range),
    rate: positive('rate', v.rate, 20),
    slowClients: v['slow-clients'] === undefined ? (scenario === 'slow' ? 2 : 0) : Math.floor(Number(v['slow-clients'])) || 0,
    slowRate: v['slow-rate'] === undefined ? 16 * 1024 : parseSize('slow-rate', v['slow-rate']),
    mix: parseMix(v.mix),
    mixGiven: v.mix !== undefined,
    keep: v.keep === true,
    progress: v.progress === true || (v.quiet !== true && process.stderr.isTTY === true),
    json: v.json,
    report: v.report,
    maxP99Ms: v['max-p99-ms'] === undefined ? undefined : positive('max-p99-ms', v['max-p99-ms'], 0),
    maxRssMib: v['max-rss-mib'] === undefined ? undefined : positive('max-rss-mib', v['max-rss-mib'], 0),
    maxErrorRate: errorRate,
    maxThrottledRate: throttledRate,
  };
}
