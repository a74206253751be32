// `dropstream loadtest`: load on any server by URL and API key, a live
// progress line, a JSON summary and an HTML report at the end, and
// thresholds that make the exit code fail for CI.
import { writeFile } from 'node:fs/promises';
import { CliError } from '../admin-client.js';
import { parseLoadtestArgs, type LoadtestOptions } from './options.js';
import { Recorder } from './recorder.js';
import { renderReport } from './report.js';
import { deleteFile, type Target } from './requests.js';
import { startCutProxy } from './resumable.js';
import { prepare, runSlowClients, runWorkers, type Workload } from './scenarios.js';
import { scrape, startScraping } from './scrape.js';

export { LOADTEST_USAGE } from './options.js';

/** After the deadline, this long for what is still going (and the cleanup) before it is given up. */
const GRACE_MS = 30_000;

const mib = (bytes: number) => bytes / 2 ** 20;

function progressLine(recorder: Recorder, previous: { out: number; in: number; at: number }, rss: number | undefined): string {
  const moved = recorder.moved();
  const seconds = Math.max(0.001, (Date.now() - previous.at) / 1000);
  const line = `${((Date.now() - recorder.started) / 1000).toFixed(0)} s  out ${(mib(moved.out - previous.out) / seconds).toFixed(1)} MiB/s  in ${(mib(moved.in - previous.in) / seconds).toFixed(1)} MiB/s  ${recorder.requests} requests  ${recorder.errors} errors${rss === undefined ? '' : `  server RSS ${mib(rss).toFixed(0)} MiB`}`;
  Object.assign(previous, moved, { at: Date.now() });
  return line;
}

/** What the thresholds say, in words; empty when none is broken. */
export function brokenThresholds(options: LoadtestOptions, summary: { p99Ms: number; errorRate: number; server: { maxRssMiB: number | null } }): string[] {
  const broken: string[] = [];
  if (options.maxP99Ms !== undefined && summary.p99Ms > options.maxP99Ms) broken.push(`p99 ${summary.p99Ms.toFixed(1)} ms > --max-p99-ms ${options.maxP99Ms}`);
  if (options.maxErrorRate !== undefined && summary.errorRate > options.maxErrorRate) broken.push(`error rate ${summary.errorRate.toFixed(4)} > --max-error-rate ${options.maxErrorRate}`);
  if (options.maxRssMib !== undefined) {
    if (summary.server.maxRssMiB === null) broken.push('--max-rss-mib needs /metrics (--admin-url and --admin-token), and no scrape succeeded');
    else if (summary.server.maxRssMiB > options.maxRssMib) broken.push(`server RSS ${summary.server.maxRssMiB.toFixed(1)} MiB > --max-rss-mib ${options.maxRssMib}`);
  }
  return broken;
}

function parametersOf(options: LoadtestOptions) {
  // Everything needed to repeat the run, except the secrets.
  const { key: _key, adminToken: _token, server, adminUrl, ...rest } = options;
  return { ...rest, server: server.href, adminUrl: adminUrl?.href };
}

/** Runs the load test; resolves with the exit code (1 when a threshold is broken). */
export async function loadtest(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const options = parseLoadtestArgs(args, env);
  const recorder = new Recorder();
  const stop = new AbortController();
  const onInterrupt = () => stop.abort();
  process.once('SIGINT', onInterrupt);
  const deadline = recorder.started + options.durationMs;
  const target: Target = { server: options.server, key: options.key, recorder, signal: stop.signal, deadline };
  // A wrong admin URL or token is said now, not discovered as an empty chart.
  if (options.adminUrl) await scrape(options.adminUrl, options.adminToken!).then((point) => recorder.scraped(point), (err) => {
    throw new CliError(`cannot scrape /metrics: ${(err as Error).message}`);
  });
  const stopScraping = options.adminUrl ? startScraping(options.adminUrl, options.adminToken!, (point) => recorder.scraped(point)) : async () => {};
  const proxy = options.scenario !== 'uploads' && options.cutEvery ? await startCutProxy(options.server, options.cutEvery) : undefined;
  const work: Workload = { options, target, tusVia: proxy?.url ?? options.server, files: [] };
  const previous = { out: 0, in: 0, at: Date.now() };
  const ticker = options.progress
    ? setInterval(() => process.stderr.write(`\r\u001b[K${progressLine(recorder, previous, recorder.server.at(-1)?.rssBytes)}`), 1000)
    : undefined;
  // Past the deadline plus the grace, whatever is still going is given up.
  const hardStop = setTimeout(() => stop.abort(), options.durationMs + GRACE_MS);
  let operations = 0;
  let cuts = 0;
  let cleanup = { deleted: 0, failed: 0 };
  try {
    await prepare(work);
    const workersDone = new AbortController();
    const slow = runSlowClients(work, workersDone.signal);
    operations = await runWorkers(work);
    workersDone.abort();
    await slow;
  } finally {
    clearTimeout(hardStop);
    if (ticker) clearInterval(ticker);
    cuts = proxy?.cuts() ?? 0;
    await proxy?.close();
    // One last scrape, after the load, for the RSS the run left behind.
    if (options.adminUrl) await scrape(options.adminUrl, options.adminToken!).then((point) => recorder.scraped(point), () => {});
    await stopScraping();
    if (!options.keep) cleanup = await removeFiles(work, recorder);
    process.off('SIGINT', onInterrupt);
    if (ticker) process.stderr.write(`\r\u001b[K${progressLine(recorder, previous, recorder.server.at(-1)?.rssBytes)}\n`);
  }
  const summary = summarize(options, recorder, { operations, cuts }, work, cleanup);
  if (options.json) {
    const text = `${JSON.stringify(summary, null, 2)}\n`;
    if (options.json === '-') process.stdout.write(text);
    else await writeFile(options.json, text);
  }
  if (options.report) await writeFile(options.report, renderReport(summary, recorder));
  for (const line of summary.thresholds.broken) process.stderr.write(`dropstream: threshold broken: ${line}\n`);
  return summary.thresholds.broken.length ? 1 : 0;
}

/** Deletes what the run uploaded, a few at a time, with a target of its own (the run's signal may have fired). */
async function removeFiles(work: Workload, recorder: Recorder): Promise<{ deleted: number; failed: number }> {
  const target: Target = { ...work.target, recorder, signal: AbortSignal.timeout(GRACE_MS), deadline: Date.now() + GRACE_MS };
  const queue = [...work.files];
  let deleted = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let file = queue.shift(); file; file = queue.shift()) {
        if (await deleteFile(target, file.id)) deleted += 1;
        else failed += 1;
      }
    }),
  );
  return { deleted, failed };
}

function summarize(options: LoadtestOptions, recorder: Recorder, { operations, cuts }: { operations: number; cuts: number }, work: Workload, cleanup: { deleted: number; failed: number }) {
  const kinds = recorder.totals();
  const maxRss = recorder.maxRssBytes();
  const summary = {
    parameters: parametersOf(options),
    startedAt: new Date(recorder.started).toISOString(),
    elapsedSeconds: (Date.now() - recorder.started) / 1000,
    operations,
    requests: recorder.requests,
    errors: recorder.errors,
    errorRate: recorder.requests ? recorder.errors / recorder.requests : 0,
    abandoned: recorder.aborted,
    /** Connections the cutting proxy cut (--cut-every): expected, so not errors. */
    cuts,
    p99Ms: recorder.overallP99(),
    bytesOut: Object.values(kinds).reduce((sum, k) => sum + k.bytesOut, 0),
    bytesIn: Object.values(kinds).reduce((sum, k) => sum + k.bytesIn, 0),
    filesUploaded: work.files.length,
    kept: options.keep ? work.files.map((f) => f.id) : [],
    cleanup,
    kinds,
    server: { maxRssMiB: maxRss === undefined ? null : mib(maxRss), scrapes: recorder.server.length },
    thresholds: { maxP99Ms: options.maxP99Ms ?? null, maxRssMib: options.maxRssMib ?? null, maxErrorRate: options.maxErrorRate ?? null, broken: [] as string[] },
  };
  summary.thresholds.broken = brokenThresholds(options, summary);
  return summary;
}
