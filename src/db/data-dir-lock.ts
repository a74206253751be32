// One process per embedded database. PGlite is PostgreSQL compiled to
// WebAssembly with no postmaster and no shared memory between processes: two
// processes that open one folder each keep their own buffers and overwrite
// each other's pages, and rows one of them committed are lost (an upload
// answered 201 was gone after a restart). So the first opener holds
// `<folder>.lock` for as long as it runs, and every other opener is refused
// with the holder's pid.
//
// A lock left by a process that died (SIGKILL, OOM kill, power loss) is taken
// over. The holder records who it is, and the next opener decides:
// - Same host name, boot and PID namespace: the kernel knows. The holder is
//   alive only if its pid exists *and* that process started at the recorded
//   time: a pid alone is not enough, it is reused (after a restart the new
//   server may well get the dead one's pid, or be that pid itself).
// - Same host name, another boot: the machine restarted since; it is dead.
// - Otherwise (another container on a shared volume, or this container after
//   a restart, which gets a new PID namespace) /proc cannot tell. The holder
//   touches the file every `heartbeatMs`; a lock untouched for `staleMs` is
//   dead, one that is touched while we watch is alive. Taking over such a
//   lock waits up to `staleMs` after the crash.
import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { open, readFile, readlink, stat, unlink, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { StartupError } from '../startup-error.js';

/** What a holder writes into the lock file. */
export interface LockHolder {
  pid: number;
  hostname: string;
  /** /proc/sys/kernel/random/boot_id (Linux). */
  bootId?: string;
  /** readlink /proc/self/ns/pid, e.g. `pid:[4026531836]` (Linux). */
  pidNamespace?: string;
  /** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot (Linux). */
  startTicks?: string;
  /** For people: when the holder started. */
  startedAt: string;
  /** Tells this holder's file from a successor's. */
  token: string;
}

/** A StartupError: the CLI prints its message as one line, without a stack. */
export class DataDirLockedError extends StartupError {
  constructor(
    readonly dir: string,
    readonly holder: LockHolder,
  ) {
    super(
      `${dir} is in use by process ${holder.pid} on ${holder.hostname} (running since ${holder.startedAt}); ` +
        'the embedded database allows one process: stop that one first, or set DATA_DIR to another folder',
    );
    this.name = 'DataDirLockedError';
  }
}

export interface DataDirLock {
  readonly path: string;
  release(): Promise<void>;
}

export interface LockOptions {
  /** How often the holder touches its lock file. */
  heartbeatMs?: number;
  /** A lock whose holder cannot be checked through /proc is dead once untouched this long. */
  staleMs?: number;
}

const DEFAULTS = { heartbeatMs: 5_000, staleMs: 15_000 };

/** A takeover that crashed mid-way leaves its guard file; it is ignored after this long. */
const TAKEOVER_GUARD_STALE_MS = 10_000;

/** A lock file still empty this long after it was created belongs to a process that died while writing it. */
const EMPTY_LOCK_STALE_MS = 2_000;

async function startTicks(pid: number): Promise<string | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may itself contain spaces and ')'; starttime is field 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

let self: Promise<Omit<LockHolder, 'token'>> | undefined;

function whoAmI(): Promise<Omit<LockHolder, 'token'>> {
  self ??= (async () => {
    const [bootId, pidNamespace, ticks] = await Promise.all([
      readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((s) => s.trim(), () => undefined),
      readlink('/proc/self/ns/pid').catch(() => undefined),
      startTicks(process.pid),
    ]);
    const startedAt = new Date(Date.now() - process.uptime() * 1000).toISOString();
    return { pid: process.pid, hostname: hostname(), bootId, pidNamespace, startTicks: ticks, startedAt };
  })();
  return self;
}

type Verdict = 'alive' | 'dead' | 'unknown';

async function judge(holder: LockHolder): Promise<Verdict> {
  const me = await whoAmI();
  if (holder.hostname !== me.hostname) return 'unknown';
  if (holder.bootId && me.bootId && holder.bootId !== me.bootId) return 'dead';
  if (holder.pidNamespace !== me.pidNamespace) return 'unknown';
  const ticks = await startTicks(holder.pid);
  if (ticks !== undefined) return holder.startTicks === undefined || ticks === holder.startTicks ? 'alive' : 'dead';
  // No /proc entry: gone, or hidden from us (hidepid), or not Linux.
  try {
    process.kill(holder.pid, 0);
    return 'alive';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? 'alive' : 'dead';
  }
}

const mtime = (path: string) => stat(path).then((s) => s.mtimeMs, () => undefined);

/** Watches the heartbeat of a holder /proc cannot see: alive if it beats, dead once it has been silent for `staleMs`. */
async function watchHeartbeat(path: string, staleMs: number): Promise<Verdict> {
  const first = await mtime(path);
  if (first === undefined) return 'dead';
  for (;;) {
    const now = await mtime(path);
    if (now === undefined) return 'dead';
    if (now !== first) return 'alive';
    if (Date.now() - now > staleMs) return 'dead';
    await sleep(Math.min(250, staleMs / 4));
  }
}

/**
 * Removes a dead holder's file, if it is still the one we judged: a guard
 * file makes "check and remove" one step among openers racing for it, so
 * none can remove a lock another has just taken.
 */
async function takeOver(path: string, judged: string): Promise<void> {
  const guardPath = `${path}.takeover`;
  const guard = await open(guardPath, 'wx', 0o600).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
    return undefined;
  });
  if (!guard) {
    const age = Date.now() - ((await mtime(guardPath)) ?? Date.now());
    if (age > TAKEOVER_GUARD_STALE_MS) await unlink(guardPath).catch(() => {});
    await sleep(50);
    return;
  }
  try {
    const current = await readFile(path, 'utf8').catch(() => undefined);
    if (current === judged) await unlink(path);
  } finally {
    await guard.close();
    await unlink(guardPath).catch(() => {});
  }
}

/** Locks this process holds, removed on exit if not released before (process.exit() in the CLI, a fatal error). */
const held = new Set<HeldLock>();
let exitHook = false;

class HeldLock implements DataDirLock {
  private readonly heartbeat: NodeJS.Timeout;
  private released = false;

  constructor(
    readonly path: string,
    private readonly file: FileHandle,
    private readonly token: string,
    heartbeatMs: number,
  ) {
    this.heartbeat = setInterval(() => {
      const now = new Date();
      this.file.utimes(now, now).catch(() => {});
    }, heartbeatMs).unref();
    held.add(this);
    if (!exitHook) {
      exitHook = true;
      process.on('exit', () => {
        for (const lock of held) lock.removeSync();
      });
    }
  }

  /** Synchronous, for process.on('exit'). */
  removeSync(): void {
    try {
      if (readFileSync(this.path, 'utf8').includes(this.token)) unlinkSync(this.path);
    } catch {}
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    held.delete(this);
    clearInterval(this.heartbeat);
    const current = await readFile(this.path, 'utf8').catch(() => '');
    if (current.includes(this.token)) await unlink(this.path).catch(() => {});
    await this.file.close();
  }
}

/**
 * Takes the lock of the folder `dir` (the file `<dir>.lock`, so the folder's
 * parent must exist), or throws DataDirLockedError naming the live holder.
 */
export async function lockDataDir(dir: string, options: LockOptions = {}): Promise<DataDirLock> {
  const { heartbeatMs, staleMs } = { ...DEFAULTS, ...options };
  const path = `${dir}.lock`;
  for (let attempt = 0; attempt < 20; attempt++) {
    const file = await open(path, 'wx', 0o600).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      return undefined;
    });
    if (file) {
      const token = randomBytes(16).toString('hex');
      try {
        await file.writeFile(`${JSON.stringify({ ...(await whoAmI()), token })}\n`);
        await file.datasync();
      } catch (err) {
        await file.close();
        await unlink(path).catch(() => {});
        throw err;
      }
      return new HeldLock(path, file, token, heartbeatMs);
    }

    const raw = await readFile(path, 'utf8').catch(() => undefined);
    if (raw === undefined) continue; // released meanwhile
    let holder: LockHolder | undefined;
    try {
      holder = JSON.parse(raw) as LockHolder;
    } catch {}
    let verdict: Verdict;
    if (!holder) {
      // Empty or half-written: its creator is writing it now, or died doing so.
      const age = Date.now() - ((await mtime(path)) ?? Date.now());
      if (age < EMPTY_LOCK_STALE_MS) {
        await sleep(100);
        continue;
      }
      verdict = 'dead';
    } else {
      verdict = await judge(holder);
      if (verdict === 'unknown') verdict = await watchHeartbeat(path, staleMs);
    }
    if (verdict === 'alive') throw new DataDirLockedError(dir, holder!);
    await takeOver(path, raw);
  }
  throw new Error(`could not lock ${dir}: the lock file keeps changing hands`);
}
