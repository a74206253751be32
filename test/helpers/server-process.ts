// A dropstream server in a child process, for tests that kill it (SIGKILL)
// and start it again on the same data.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface ServerProcess {
  url: string;
  adminUrl: string;
  adminToken: string;
  child: ChildProcess;
  /** Every line the server wrote to stdout so far. */
  stdoutLines: string[];
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** Calls the admin API; throws unless 2xx. */
  admin(method: string, path: string, body?: unknown): Promise<any>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export interface ServerProcessOptions {
  /** The process's limit on open file descriptors (`ulimit -n`, soft and hard), for tests of running out of them. */
  openFiles?: number;
  /** The package to run (its bin/dropstream.js): another build, e.g. a release's (test/helpers/release-build.ts). Default: this checkout. */
  root?: string;
}

export async function startServerProcess(env: Record<string, string>, { openFiles, root }: ServerProcessOptions = {}): Promise<ServerProcess> {
  const command = [process.execPath, root ? join(root, 'bin', 'dropstream.js') : 'bin/dropstream.js', 'serve'];
  // The shell lowers the limit and then becomes the server (exec): the same pid, so kill() reaches it.
  const [file, ...args] = openFiles === undefined ? command : ['/bin/sh', '-c', `ulimit -n ${openFiles} && exec "$@"`, 'sh', ...command];
  const child = spawn(file!, args, {
    // SHUTDOWN_IDLE_WAIT: as for in-process test servers (test/helpers/server.ts).
    env: { ...process.env, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SHUTDOWN_IDLE_WAIT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const stdoutLines: string[] = [];
  const ready = await new Promise<{ url: string; adminUrl: string }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      stdoutLines.push(line);
      try {
        const entry = JSON.parse(line);
        if (entry.msg === 'dropstream listening') resolve(entry);
      } catch {}
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
  });
  const adminToken = env.ADMIN_TOKEN ?? (await readFile(join(env.DATA_DIR!, 'admin-token'), 'utf8')).trim();
  return {
    ...ready,
    adminToken,
    child,
    stdoutLines,
    stderr: () => stderr,
    async admin(method, path, body) {
      const res = await fetch(ready.adminUrl + path, {
        method,
        headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json: any = await res.json();
      if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    async kill(signal = 'SIGKILL') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // 'close', not 'exit': by then stdout and stderr are drained.
      const closed = once(child, 'close');
      child.kill(signal);
      await closed;
    },
  };
}
