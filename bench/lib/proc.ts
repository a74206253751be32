// Every party of a benchmark runs in a child process of its own, so the
// kernel's accounting (VmHWM, utime/stime in /proc/<pid>) is per party. This
// module starts them, waits for the JSON line that says they are ready, and
// reads that accounting. Children are compiled JavaScript (bench/data/dist),
// not tsx: tsx's loader thread alone adds ~40 MiB to a process's peak RSS,
// which would be charged to the peers we compare against.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export const MiB = 1024 * 1024;

/** Kernel clock ticks per second (USER_HZ); 100 on every Linux we run on. */
const TICKS = 100;

export interface StartOptions {
  /** Log file name under the log directory. */
  name: string;
  /** Arguments after `node` (a script and its arguments). */
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** The first stdout JSON line for which this is true means "ready"; absent: ready at spawn. */
  ready?: (line: Record<string, unknown>) => boolean;
  /** Seconds to wait for readiness. */
  timeoutSeconds?: number;
}

let logDir = '/tmp';
export const setLogDir = (dir: string) => void (logDir = dir);

/** Peak resident set (VmHWM) of a live process, in bytes. */
export async function peakRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Current resident set (VmRSS), in bytes. */
export async function currentRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/**
 * Resets VmHWM to the current RSS (`echo 5 > /proc/<pid>/clear_refs`,
 * Linux >= 4.0), so a long-running server's peak can be read per run
 * without restarting it.
 */
export async function resetPeakRss(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/clear_refs`, '5');
}

/** CPU seconds (user + system) the process has used so far. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may itself contain spaces and ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

/** Busy and total CPU seconds of the whole machine (all cores), from /proc/stat. */
export async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!;
  const [, ...values] = line.trim().split(/\s+/);
  const n = values.map(Number);
  const idle = n[3]! + n[4]!; // idle + iowait
  const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: (total - idle) / TICKS, total: total / TICKS };
}

/**
 * CPU seconds used so far by every process whose command line matches, e.g.
 * the PostgreSQL backends serving one database ("postgres: ... <dbname> ...")
 * or redis-server. Processes that exit during a run take their time with them.
 */
export async function cpuSecondsOf(match: (cmdline: string) => boolean): Promise<number> {
  let total = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).replace(/\0/g, ' ');
      if (match(cmdline)) total += await cpuSeconds(Number(entry));
    } catch {
      // gone in the meantime
    }
  }
  return total;
}

export class Proc {
  readonly lines: Record<string, unknown>[] = [];
  private readonly exited: Promise<number | null>;
  private readonly log: WriteStream;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    this.log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
    child.stderr!.pipe(this.log, { end: false });
    // 'close', not 'exit': by then stdout is drained, so a result line printed
    // just before exiting is never lost.
    this.exited = once(child, 'close').then(([code]) => code as number | null);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  peakRss = () => peakRss(this.pid);
  resetPeakRss = () => resetPeakRss(this.pid);
  cpuSeconds = () => cpuSeconds(this.pid);

  /** Exit code once the process has ended. */
  wait(): Promise<number | null> {
    return this.exited;
  }

  /** SIGTERM, then SIGKILL if it has not gone after `graceSeconds`. */
  async stop(graceSeconds = 10): Promise<void> {
    if (this.alive) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceSeconds * 1000);
      await this.exited;
      clearTimeout(timer);
    }
    this.log.end();
  }

  /** Internal: wires stdout; JSON lines are kept, everything goes to the log. */
  attach(ready: StartOptions['ready']): Promise<Record<string, unknown>> {
    const lines = createInterface({ input: this.child.stdout! });
    return new Promise((resolve, reject) => {
      let done = !ready;
      if (!ready) resolve({});
      lines.on('line', (line) => {
        this.log.write(`${line}\n`);
        // A server's lines after its ready line are its request log: only
        // logged, since parsing and keeping them would cost this process (which
        // shares the cores with the server it measures) CPU and memory per request.
        if (done && ready) return;
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          return;
        }
        if (!parsed || typeof parsed !== 'object') return;
        const obj = parsed as Record<string, unknown>;
        this.lines.push(obj);
        if (!done && ready!(obj)) {
          done = true;
          resolve(obj);
        }
      });
      void this.exited.then((code) => {
        if (!done) reject(new Error(`${this.name} exited with ${code} before it was ready (see ${logDir}/${this.name}.log)`));
      });
    });
  }
}

/** Starts `node <args>` and resolves once it printed its ready line. */
export async function start(options: StartOptions): Promise<{ proc: Proc; ready: Record<string, unknown> }> {
  const child = spawn(process.execPath, options.args, { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const proc = new Proc(options.name, child);
  const timeout = (options.timeoutSeconds ?? 60) * 1000;
  let timer: NodeJS.Timeout | undefined;
  try {
    const ready = await Promise.race([
      proc.attach(options.ready),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${options.name} not ready after ${timeout / 1000} s`)), timeout);
      }),
    ]);
    return { proc, ready };
  } catch (err) {
    await proc.stop(2);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs a short-lived process to its end and returns its last JSON line
 * (clients and direct uploaders print their result, including their own
 * VmHWM and CPU time, read just before they exit).
 */
export async function run<T = Record<string, unknown>>(options: Omit<StartOptions, 'ready'>): Promise<T> {
  const { proc } = await start(options);
  const code = await proc.wait();
  await proc.stop();
  if (code !== 0) throw new Error(`${options.name} exited with ${code} (see ${logDir}/${options.name}.log)`);
  const last = proc.lines.at(-1);
  if (!last) throw new Error(`${options.name} printed no result`);
  return last as T;
}
