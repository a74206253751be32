// strace, for tests that watch the system calls a child process makes (the
// local store's fdatasyncs, fsyncs and renames: what a power cut keeps is
// decided in the kernel, where a spy on Node's FileHandle cannot see). CI
// installs Debian's package (.ci/clients.sh); a newcomer's machine may not
// have it, so there those tests are named under "Did not run", as with Chromium.
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { notRun } from './not-run.js';
import { runToExit, type ExitResult } from './run-to-exit.js';

const available = spawnSync('strace', ['-V'], { stdio: 'ignore' }).status === 0;

/** `it(title, fn)` where strace is installed; elsewhere named under "Did not run". */
export function itWithStrace(title: string, fn: Mocha.AsyncFunc): void {
  if (available) {
    it(title, fn);
    return;
  }
  if (process.env.CI) throw new Error(`CI must have strace for "${title}": apt-get install strace (see .ci/clients.sh)`);
  notRun(`strace is missing: "${title}"`, 'apt-get install strace, then npm test');
}

/** One traced call: its name, its arguments as strace wrote them (fds with their paths), its result, and where it started and returned in the trace. */
export interface Syscall {
  name: string;
  args: string;
  result: number;
  /** Index in the trace of the line that began the call. */
  start: number;
  /** Index in the trace of the line that returned (the same as `start` unless another thread's call came between). */
  end: number;
}

/**
 * Runs `node ...args` under `strace -f -y -e trace=<syscalls>` to its exit;
 * resolves with the calls in the order they began, and the run.
 */
export async function traceNode(args: string[], syscalls: string[], env: NodeJS.ProcessEnv, traceFile: string): Promise<{ calls: Syscall[]; run: ExitResult }> {
  const run = await runToExit(['-f', '-qq', '-y', '-e', 'signal=none', '-e', `trace=${syscalls.join(',')}`, '-o', traceFile, process.execPath, ...args], {
    env,
    node: 'strace',
    deadlineMs: 60_000,
  });
  return { calls: parseTrace(await readFile(traceFile, 'utf8').catch(() => '')), run };
}

/** Lines of `strace -f -o`: `PID name(args) = N`, or `PID name(args <unfinished ...>` then `PID <... name resumed>...) = N`. */
export function parseTrace(text: string): Syscall[] {
  const calls: Syscall[] = [];
  const open = new Map<string, Syscall>();
  text.split('\n').forEach((line, index) => {
    const resumed = /^(\d+) +<\.\.\. (\w+) resumed>.*\) += (-?\d+)/.exec(line);
    if (resumed) {
      const call = open.get(resumed[1]!);
      if (call) Object.assign(call, { result: Number(resumed[3]), end: index });
      open.delete(resumed[1]!);
      return;
    }
    const unfinished = /^(\d+) +(\w+)\((.*) <unfinished \.\.\.>$/.exec(line);
    if (unfinished) {
      const call = { name: unfinished[2]!, args: unfinished[3]!, result: NaN, start: index, end: NaN };
      open.set(unfinished[1]!, call);
      calls.push(call);
      return;
    }
    const whole = /^(\d+) +(\w+)\((.*)\) += (-?\d+)/.exec(line);
    if (whole) calls.push({ name: whole[2]!, args: whole[3]!, result: Number(whole[4]), start: index, end: index });
  });
  return calls;
}
