// The run's result: the JSON summary (one owner of every number), the
// verdict, and the table printed at the end (k6, autocannon, Artillery and
// Locust all end with one). The table is made from the JSON summary alone,
// so the two never disagree.
import type { LoadtestOptions } from './options.js';
import type { KindTotals, Recorder } from './recorder.js';

/** Above this share of throttled requests the run measured the limits, not the server's streaming path. */
export const THROTTLED_HEADLINE_RATE = 0.05;

const mib = (bytes: number) => bytes / 2 ** 20;

export interface Cleanup {
  deleted: number;
  /** --setup: files found on the run's own account that the run never learnt of, deleted too. */
  strays: number;
  /** Files it could not delete (the ids are in `left`). */
  failed: number;
  left: number[];
  /** The cleanup's own requests by status: not part of the measured load. */
  statuses: Record<string, number>;
  /** Spent waiting out Retry-After. */
  waitedSeconds: number;
  /** tus uploads the throttled run left: finished ones whose file it asked for, unfinished ones it terminated. */
  tus: { asked: number; terminated: number };
  /** Uploads straight to the store the run began and did not finish, aborted (DELETE) so they give back their slots. */
  direct: { aborted: number };
}

export interface SetupRecord {
  plan: string;
  accountId: number;
  /** Both removed at the end; otherwise `left` says what remains and why. */
  removed: boolean;
  left?: string;
}

export type Summary = ReturnType<typeof summarize>;

/** What the thresholds say, in words; empty when none is broken. */
export function brokenThresholds(
  options: LoadtestOptions,
  summary: { p99Ms: number; errorRate: number; throttledRate: number; server: { maxRssMiB: number | null } },
): string[] {
  const broken: string[] = [];
  if (options.maxP99Ms !== undefined && summary.p99Ms > options.maxP99Ms) broken.push(`p99 ${summary.p99Ms.toFixed(1)} ms > --max-p99-ms ${options.maxP99Ms}`);
  if (options.maxErrorRate !== undefined && summary.errorRate > options.maxErrorRate) broken.push(`error rate ${summary.errorRate.toFixed(4)} > --max-error-rate ${options.maxErrorRate}`);
  if (options.maxThrottledRate !== undefined && summary.throttledRate > options.maxThrottledRate) {
    broken.push(`throttled rate ${summary.throttledRate.toFixed(4)} > --max-throttled-rate ${options.maxThrottledRate}`);
  }
  if (options.maxRssMib !== undefined) {
    if (summary.server.maxRssMiB === null) broken.push('--max-rss-mib needs /metrics (--admin-url and --admin-token), and no scrape succeeded');
    else if (summary.server.maxRssMiB > options.maxRssMib) broken.push(`server RSS ${summary.server.maxRssMiB.toFixed(1)} MiB > --max-rss-mib ${options.maxRssMib}`);
  }
  return broken;
}

const percent = (rate: number) => `${(rate * 100).toFixed(rate > 0 && rate < 0.01 ? 2 : 0)}%`;

/** The one line that says whether to trust the run: throttling first, then thresholds, then the numbers. */
export function headline(s: { requests: number; errors: number; errorRate: number; throttledRate: number; p99Ms: number; setup: SetupRecord | null; thresholds: { broken: string[] } }): { ok: boolean; text: string } {
  const parts: string[] = [];
  const throttled = s.throttledRate > THROTTLED_HEADLINE_RATE;
  if (throttled) {
    parts.push(
      s.setup
        ? `the server's limits refused ${percent(s.throttledRate)} of requests (429/503) even on the load-test plan: this run measured the upload cap or the limiter`
        : `the plan's limits refused ${percent(s.throttledRate)} of requests: this run measured the limiter; see --setup`,
    );
  }
  if (s.thresholds.broken.length) parts.push(`thresholds broken: ${s.thresholds.broken.join('; ')}`);
  if (!parts.length) parts.push(`${s.requests} requests, ${s.errors} errors (${percent(s.errorRate)}), ${percent(s.throttledRate)} throttled, p99 ${s.p99Ms.toFixed(1)} ms; no threshold broken`);
  return { ok: !throttled && s.thresholds.broken.length === 0, text: parts.join('. ') };
}

function parametersOf(options: LoadtestOptions) {
  // Everything needed to repeat the run, except the secrets.
  const { key: _key, adminToken: _token, server, adminUrl, ...rest } = options;
  return { ...rest, server: server.href, adminUrl: adminUrl?.href };
}

interface RunFacts {
  operations: number;
  cuts: number;
  /** The measured window: from the start to the end of the load, before the cleanup. */
  measuredMs: number;
  filesUploaded: number;
  kept: number[];
  cleanup: Cleanup;
  setup: SetupRecord | null;
  waitedMs: number;
}

export function summarize(options: LoadtestOptions, recorder: Recorder, facts: RunFacts) {
  const seconds = Math.max(0.001, facts.measuredMs / 1000);
  const kinds: Record<string, KindTotals & { mbPerSecond: number }> = {};
  for (const [name, k] of Object.entries(recorder.totals())) kinds[name] = { ...k, mbPerSecond: (k.bytesOut + k.bytesIn) / 1e6 / seconds };
  const all = Object.values(kinds);
  const overall = recorder.overall();
  const maxRss = recorder.maxRssBytes();
  const bytesOut = all.reduce((sum, k) => sum + k.bytesOut, 0);
  const bytesIn = all.reduce((sum, k) => sum + k.bytesIn, 0);
  const summary = {
    parameters: parametersOf(options),
    startedAt: new Date(recorder.started).toISOString(),
    /** The measured window (the cleanup after it is not part of it). */
    elapsedSeconds: facts.measuredMs / 1000,
    operations: facts.operations,
    requests: recorder.requests,
    errors: recorder.errors,
    errorRate: recorder.requests ? recorder.errors / recorder.requests : 0,
    throttled: recorder.throttled,
    throttledRate: recorder.requests ? recorder.throttled / recorder.requests : 0,
    /** Wall-clock time the run's requests waited out Retry-After. */
    throttledWaitSeconds: facts.waitedMs / 1000,
    abandoned: recorder.aborted,
    /** Connections the cutting proxy cut (--cut-every): expected, so not errors. */
    cuts: facts.cuts,
    p50Ms: overall.p50,
    p90Ms: overall.p90,
    p99Ms: overall.p99,
    maxMs: overall.max,
    bytesOut,
    bytesIn,
    mbPerSecond: (bytesOut + bytesIn) / 1e6 / seconds,
    filesUploaded: facts.filesUploaded,
    kept: facts.kept,
    cleanup: facts.cleanup,
    setup: facts.setup,
    kinds,
    server: { maxRssMiB: maxRss === undefined ? null : mib(maxRss), scrapes: recorder.server.length },
    thresholds: {
      maxP99Ms: options.maxP99Ms ?? null,
      maxRssMib: options.maxRssMib ?? null,
      maxErrorRate: options.maxErrorRate ?? null,
      maxThrottledRate: options.maxThrottledRate ?? null,
      broken: [] as string[],
    },
    verdict: { ok: true, headline: '' },
  };
  summary.thresholds.broken = brokenThresholds(options, summary);
  const verdict = headline(summary);
  summary.verdict = { ok: verdict.ok, headline: verdict.text };
  return summary;
}

/** Columns of the printed table, in order; test/loadtest reads them back and compares them with the JSON. */
export const TABLE_COLUMNS = ['kind', 'requests', 'errors', 'throttled', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'MB/s'] as const;

const row = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(16) : cell.padStart(9))).join(' ');

/** The human summary: per kind, the totals, the cleanup and the verdict. */
export function summaryText(s: Summary): string {
  const line = (name: string, k: { requests: number; errors: number; throttled: number; p50: number; p90: number; p99: number; max: number; mbPerSecond: number }) =>
    row([name, String(k.requests), String(k.errors), String(k.throttled), k.p50.toFixed(1), k.p90.toFixed(1), k.p99.toFixed(1), k.max.toFixed(1), k.mbPerSecond.toFixed(2)]);
  const lines = [
    `dropstream loadtest ${s.parameters.scenario} against ${s.parameters.server}: ${s.elapsedSeconds.toFixed(1)} s measured, ${s.operations} operations`,
    row([...TABLE_COLUMNS]),
    ...Object.entries(s.kinds).map(([name, k]) => line(name, k)),
    line('total', { requests: s.requests, errors: s.errors, throttled: s.throttled, p50: s.p50Ms, p90: s.p90Ms, p99: s.p99Ms, max: s.maxMs, mbPerSecond: s.mbPerSecond }),
  ];
  if (s.server.maxRssMiB !== null) lines.push(`server RSS max ${s.server.maxRssMiB.toFixed(1)} MiB (${s.server.scrapes} scrapes of /metrics)`);
  lines.push(cleanupText(s));
  if (s.setup) lines.push(s.setup.removed ? `setup: removed plan ${s.setup.plan} and account ${s.setup.accountId}` : `setup: ${s.setup.left}`);
  lines.push(`${s.verdict.ok ? 'PASS' : 'FAIL'}: ${s.verdict.headline}`);
  return `${lines.join('\n')}\n`;
}

function cleanupText(s: Summary): string {
  const { cleanup } = s;
  if (s.parameters.keep) return `kept ${s.kept.length} files (--keep): ${s.kept.join(' ') || 'none'}`;
  const waited = cleanup.waitedSeconds >= 1 ? `, after waiting ${cleanup.waitedSeconds.toFixed(0)} s for Retry-After` : '';
  const left = cleanup.failed ? `; could not delete ${cleanup.failed}: ${cleanup.left.join(' ')}` : '';
  const strays = cleanup.strays ? `, and ${cleanup.strays} more found on its own account` : '';
  const tus = cleanup.tus.terminated ? `, terminated ${cleanup.tus.terminated} unfinished tus uploads` : '';
  const direct = cleanup.direct?.aborted ? `, aborted ${cleanup.direct.aborted} unfinished direct uploads` : '';
  return `cleanup (not measured): deleted ${cleanup.deleted} of ${s.filesUploaded} files it uploaded${strays}${tus}${direct}${waited}${left}`;
}
