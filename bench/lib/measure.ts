// Statistics and the order of runs. Each comparison runs its sides
// alternately in the same session, rotating who goes first, so drift (page
// cache, s3rver's folder growing, thermal) spreads over every side instead
// of favouring one; results are medians.
import { cpuSeconds, machineCpu, peakRss, resetPeakRss, MiB } from './proc.js';

/** Totals of CPU seconds of a group of processes (see cpuSecondsOf). */
export type CpuGroups = Record<string, () => Promise<number>>;

export function median(values: number[]): number {
  if (!values.length) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export const round = (value: number, digits = 1) => Number(value.toFixed(digits));
export const mib = (bytes: number) => round(bytes / MiB);
export const mbPerSecond = (bytes: number, seconds: number) => round(bytes / 1e6 / seconds);

/** Runs every side `reps` times; rep r starts with side r mod n. */
export async function alternate<K extends string, R>(sides: readonly K[], reps: number, runOne: (side: K, rep: number) => Promise<R>): Promise<Record<K, R[]>> {
  const results = Object.fromEntries(sides.map((s) => [s, [] as R[]])) as Record<K, R[]>;
  for (let rep = 0; rep < reps; rep++) {
    for (let i = 0; i < sides.length; i++) {
      const side = sides[(rep + i) % sides.length]!;
      results[side].push(await runOne(side, rep));
    }
  }
  return results;
}

export interface Watch {
  /** Peak RSS (MiB) of each watched process during the run. */
  peakRssMib: Record<string, number>;
  /** CPU used by each watched process, as % of one core over the run. */
  cpuPct: Record<string, number>;
  /** Whole machine, % of all cores busy. */
  machinePct: number;
  /** Whole machine, in % of one core (so it adds up with cpuPct). */
  machineCorePct: number;
  /** Seconds waited before the run for other work on the machine to calm down. */
  quietWaitSeconds: number;
  seconds: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits (up to `maxSeconds`) until the machine is mostly idle: other people's
 * test runs share these two cores, and a run that starts while they are busy
 * measures them as much as us. Returns the seconds waited.
 */
let quietMax = 10;
/** The longest waitForQuiet() waits (bench/run.ts: 3 s with --quick, 10 s otherwise). */
export const setQuietWait = (seconds: number) => void (quietMax = seconds);

export async function waitForQuiet(maxSeconds = quietMax, busyFraction = 0.25): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const a = await machineCpu();
    await sleep(500);
    const b = await machineCpu();
    const busy = (b.busy - a.busy) / (b.total - a.total);
    const waited = (Date.now() - t0) / 1000;
    if (busy <= busyFraction || waited >= maxSeconds) return round(Math.max(0, waited - 0.5), 1);
  }
}

/**
 * Runs `fn` while watching processes through the kernel: resets their VmHWM
 * before, reads it after, and turns CPU time into % of one core. With two
 * cores shared by s3rver, the server and the client, these numbers say who
 * the bottleneck was.
 */
export async function watch<T>(pids: Record<string, number>, fn: () => Promise<T>, groups: CpuGroups = {}): Promise<{ result: T; watch: Watch }> {
  const names = Object.keys(pids);
  const groupNames = Object.keys(groups);
  const quietWaitSeconds = await waitForQuiet();
  await Promise.all(names.map((n) => resetPeakRss(pids[n]!)));
  const cpu0 = await Promise.all(names.map((n) => cpuSeconds(pids[n]!)));
  const g0 = await Promise.all(groupNames.map((n) => groups[n]!()));
  const m0 = await machineCpu();
  const t0 = process.hrtime.bigint();
  const result = await fn();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const m1 = await machineCpu();
  const cpu1 = await Promise.all(names.map((n) => cpuSeconds(pids[n]!)));
  const g1 = await Promise.all(groupNames.map((n) => groups[n]!()));
  const peaks = await Promise.all(names.map((n) => peakRss(pids[n]!)));
  return {
    result,
    watch: {
      peakRssMib: Object.fromEntries(names.map((n, i) => [n, mib(peaks[i]!)])),
      cpuPct: {
        ...Object.fromEntries(names.map((n, i) => [n, round(((cpu1[i]! - cpu0[i]!) / seconds) * 100, 0)])),
        // A group loses the time of its processes that exit mid-run (an idle
        // pool connection closing), which can make the difference negative.
        ...Object.fromEntries(groupNames.map((n, i) => [n, Math.max(0, round(((g1[i]! - g0[i]!) / seconds) * 100, 0))])),
      },
      machinePct: round(((m1.busy - m0.busy) / (m1.total - m0.total)) * 100, 0),
      machineCorePct: round(((m1.busy - m0.busy) / seconds) * 100, 0),
      quietWaitSeconds,
      seconds,
    },
  };
}
