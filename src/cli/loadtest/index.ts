// `dropstream loadtest`: load on any server by URL and API key (or on a plan
// and account of its own, --setup), a live status line, a summary table at
// the end, a JSON summary and an HTML report, and thresholds that make the
// exit code fail for CI. `loadtest compare` diffs two JSON summaries.
import { writeFile } from 'node:fs/promises';
import { CliError } from '../cli-error.js';
import { removeFiles } from './cleanup.js';
import { parseLoadtestArgs } from './options.js';
import { Recorder } from './recorder.js';
import { renderReport } from './report.js';
import type { Output } from './output.js';
import type { Target } from './requests.js';
import { startCutProxy } from './resumable.js';
import { prepare, runSlowClients, runWorkers, type Workload } from './scenarios.js';
import { scrape, startScraping } from './scrape.js';
import { provision, type Provisioned } from './setup.js';
import { summarize, summaryText, type Cleanup } from './summary.js';
import { ThrottleGate } from './throttle.js';

export { LOADTEST_USAGE } from './options.js';

/** After the deadline, this long for what is still going before it is given up. */
const GRACE_MS = 30_000;

const mib = (bytes: number) => bytes / 2 ** 20;

function progressLine(recorder: Recorder, previous: { out: number; in: number; at: number }, rss: number | undefined): string {
  const moved = recorder.moved();
  const seconds = Math.max(0.001, (Date.now() - previous.at) / 1000);
  const line = `${((Date.now() - recorder.started) / 1000).toFixed(0)} s  out ${(mib(moved.out - previous.out) / seconds).toFixed(1)} MiB/s  in ${(mib(moved.in - previous.in) / seconds).toFixed(1)} MiB/s  ${recorder.requests} requests  ${recorder.errors} errors  ${recorder.throttled} throttled${rss === undefined ? '' : `  server RSS ${mib(rss).toFixed(0)} MiB`}`;
  Object.assign(previous, moved, { at: Date.now() });
  return line;
}

/** Runs the load test (or `compare`); resolves with the exit code (1 when a threshold is broken). */
export async function loadtest(args: string[], env: NodeJS.ProcessEnv = process.env, out: Output = process): Promise<number> {
  if (args[0] === 'compare') {
    const { compare } = await import('./compare.js');
    return compare(args.slice(1), out);
  }
  const options = parseLoadtestArgs(args, env);
  // A wrong admin URL or token is said now, not discovered as an empty chart.
  const firstScrape = options.adminUrl
    ? await scrape(options.adminUrl, options.adminToken!).catch((err) => {
        throw new CliError(`cannot scrape /metrics: ${(err as Error).message}`);
      })
    : undefined;
  let provisioned: Provisioned | undefined;
  if (options.setup) {
    provisioned = await provision(options);
    out.stderr.write(`dropstream: --setup: plan ${provisioned.record.plan}, account ${provisioned.record.accountId} (removed at the end)\n`);
  }
  // Ctrl-C ends the load; the cleanup (and --setup's removal) still runs.
  const stop = new AbortController();
  const onInterrupt = () => stop.abort();
  process.once('SIGINT', onInterrupt);
  const recorder = new Recorder();
  if (firstScrape) recorder.scraped(firstScrape);
  const deadline = recorder.started + options.durationMs;
  const target: Target = { server: options.server, key: provisioned?.key ?? options.key, recorder, signal: stop.signal, deadline, gate: new ThrottleGate() };
  const stopScraping = options.adminUrl ? startScraping(options.adminUrl, options.adminToken!, (point) => recorder.scraped(point)) : async () => {};
  const proxy = options.scenario !== 'uploads' && options.cutEvery ? await startCutProxy(options.server, options.cutEvery) : undefined;
  const work: Workload = { options, target, tusVia: proxy?.url ?? options.server, files: [], tus: { finished: [], unfinished: [] }, direct: [] };
  const previous = { out: 0, in: 0, at: Date.now() };
  const status = () => progressLine(recorder, previous, recorder.server.at(-1)?.rssBytes);
  const ticker = options.progress ? setInterval(() => out.stderr.write(`\r\u001b[K${status()}`), 1000) : undefined;
  // Past the deadline plus the grace, whatever is still going is given up.
  const hardStop = setTimeout(() => stop.abort(), options.durationMs + GRACE_MS);
  let operations = 0;
  let cuts = 0;
  let measuredMs = 0;
  let waitedMs = 0;
  let cleanup: Cleanup = { deleted: 0, strays: 0, failed: 0, left: [], statuses: {}, waitedSeconds: 0, tus: { asked: 0, terminated: 0 }, direct: { aborted: 0 } };
  try {
    await prepare(work);
    const workersDone = new AbortController();
    const slow = runSlowClients(work, workersDone.signal);
    operations = await runWorkers(work);
    workersDone.abort();
    await slow;
  } finally {
    measuredMs = Date.now() - recorder.started;
    waitedMs = target.gate.waitedMs;
    clearTimeout(hardStop);
    if (ticker) {
      clearInterval(ticker);
      out.stderr.write(`\r\u001b[K${status()}\n`);
    }
    cuts = proxy?.cuts() ?? 0;
    await proxy?.close();
    // One last scrape, after the load, for the RSS the run left behind.
    if (options.adminUrl) await scrape(options.adminUrl, options.adminToken!).then((point) => recorder.scraped(point), () => {});
    await stopScraping();
    // The cleanup has a signal of its own: Ctrl-C during the run ends the load, a second one the cleanup.
    const cleanupStop = new AbortController();
    process.off('SIGINT', onInterrupt);
    const onSecondInterrupt = () => cleanupStop.abort();
    process.once('SIGINT', onSecondInterrupt);
    try {
      if (!options.keep) cleanup = await removeFiles(work, cleanupStop.signal, (line) => out.stderr.write(`dropstream: ${line}\n`));
      await provisioned?.remove();
    } finally {
      process.off('SIGINT', onSecondInterrupt);
    }
  }
  const summary = summarize(options, recorder, {
    operations,
    cuts,
    measuredMs,
    filesUploaded: work.files.length,
    kept: options.keep ? work.files.map((f) => f.id) : [],
    cleanup,
    setup: provisioned?.record ?? null,
    waitedMs,
  });
  if (options.json) {
    const text = `${JSON.stringify(summary, null, 2)}\n`;
    if (options.json === '-') out.stdout.write(text);
    else await writeFile(options.json, text);
  }
  if (options.report) await writeFile(options.report, renderReport(summary, recorder));
  // stdout stays machine-readable with --json -: the table goes to stderr then.
  (options.json === '-' ? out.stderr : out.stdout).write(summaryText(summary));
  for (const line of summary.thresholds.broken) out.stderr.write(`dropstream: threshold broken: ${line}\n`);
  return summary.thresholds.broken.length ? 1 : 0;
}
