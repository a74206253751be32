// Runs a Node script of the repository in a child process to its exit, for
// the tests of what the CLI and a start print and return.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { configVariables } from '../../src/config.js';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** This process's environment without the variables dropstream reads (nor those `alsoDrop` names), so the machine's settings stay out of the child. */
export function envWithoutConfig(alsoDrop: (name: string) => boolean = () => false): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined && !configVariables.includes(entry[0]) && !alsoDrop(entry[0])),
  );
}

export interface ExitResult {
  code: number | null;
  /** 'SIGKILL' when the deadline killed it. */
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** From spawn to exit. */
  ms: number;
}

/** `node ...args` (a script and its arguments) with exactly `env`, to its exit; killed at the deadline. */
export async function runToExit(
  args: string[],
  { env, cwd = repoRoot, node = process.execPath, deadlineMs = 20_000 }: { env: NodeJS.ProcessEnv; cwd?: string; node?: string; deadlineMs?: number },
): Promise<ExitResult> {
  const started = Date.now();
  const child = spawn(node, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code, signal, stdout, stderr, ms: Date.now() - started };
}
