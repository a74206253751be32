// Reasons the server cannot start that the operator can fix: the object store
// rejects the credentials, the database never answers, DATA_DIR is not
// writable. The CLI prints their message as one line, without a stack trace,
// as it does a ConfigError: it is read in `docker logs` or a terminal, by
// someone who did not write the code.
import { existsSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname } from 'node:path';

export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

const DENIED = new Set(['EACCES', 'EPERM']);

/**
 * Whether this process runs in a container (Docker writes /.dockerenv,
 * Podman /run/.containerenv): there a denied DATA_DIR is a volume's owner,
 * fixed on the host; elsewhere it is a folder of this machine.
 */
export const inContainer = (): boolean => existsSync('/.dockerenv') || existsSync('/run/.containerenv');

/** The nearest of `dir` and its parents that exists and is not a directory. */
function fileInTheWay(dir: string): string | undefined {
  for (let path = dir; ; path = dirname(path)) {
    try {
      if (!statSync(path).isDirectory()) return path;
    } catch {
      // Missing (or not ours to look at): look higher up.
    }
    if (dirname(path) === path) return undefined;
  }
}

/**
 * A file-system error on DATA_DIR (or under it), said as what to do: a bind
 * mount owned by root, say, while the image runs as uid 1000. Undefined for
 * any other error. `container`: whether the advice is about volumes.
 */
export function dataDirError(err: unknown, dataDir: string, container = inContainer()): StartupError | undefined {
  const { code, path, syscall } = (err ?? {}) as NodeJS.ErrnoException;
  if (typeof code !== 'string' || typeof path !== 'string' || !(path === dataDir || path.startsWith(`${dataDir}/`))) return undefined;
  const failed = `${code} on ${syscall ?? 'access'} '${path}'`;
  if (code === 'EROFS') return new StartupError(`DATA_DIR ${dataDir} is on a read-only file system (${failed}): mount a writable volume there`);
  // ENOENT on mkdir under a parent that exists: the file system takes no new folders there (/proc, say).
  if (code === 'ENOENT' && syscall === 'mkdir') return new StartupError(`DATA_DIR ${dataDir} cannot be made (${failed}): its parent takes no new directories; set DATA_DIR to a writable folder`);
  if (code === 'ENOTDIR') {
    const file = fileInTheWay(dataDir);
    if (file === dataDir) return new StartupError(`DATA_DIR ${dataDir} is a file, not a directory (${failed}): set DATA_DIR to a directory (it is made if missing), or move the file away`);
    if (file) return new StartupError(`DATA_DIR ${dataDir} cannot be made: ${file} is a file, not a directory (${failed}); set DATA_DIR to a folder elsewhere`);
  }
  if (!DENIED.has(code)) return new StartupError(`DATA_DIR ${dataDir} cannot be used (${failed})`);
  const { uid, gid, username } = userInfo();
  const fix = container
    ? `chown -R ${uid}:${gid} the directory (on the host, for a bind mount), or mount a named volume there`
    : `give it to this user (sudo chown -R ${uid}:${gid} ${dataDir}), or set DATA_DIR to a folder ${username} may write, e.g. DATA_DIR=$HOME/dropstream-data`;
  return new StartupError(`DATA_DIR ${dataDir} is not writable by this process, uid ${uid} gid ${gid} (${failed}): ${fix}`);
}
