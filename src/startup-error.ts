// Reasons the server cannot start that the operator can fix: the object store
// rejects the credentials, the database never answers, DATA_DIR is not
// writable. The CLI prints their message as one line, without a stack trace,
// as it does a ConfigError: it is read in `docker logs` or a terminal, by
// someone who did not write the code.
import { userInfo } from 'node:os';

export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

const DENIED = new Set(['EACCES', 'EPERM']);

/**
 * A file-system error on DATA_DIR (or under it), said as what to do: a bind
 * mount owned by root, say, while the image runs as uid 1000. Undefined for
 * any other error.
 */
export function dataDirError(err: unknown, dataDir: string): StartupError | undefined {
  const { code, path, syscall } = (err ?? {}) as NodeJS.ErrnoException;
  if (typeof code !== 'string' || typeof path !== 'string' || !(path === dataDir || path.startsWith(`${dataDir}/`))) return undefined;
  const failed = `${code} on ${syscall ?? 'access'} '${path}'`;
  if (code === 'EROFS') return new StartupError(`DATA_DIR ${dataDir} is on a read-only file system (${failed}): mount a writable volume there`);
  // ENOENT on mkdir under a parent that exists: the file system takes no new folders there (/proc, say).
  if (code === 'ENOENT' && syscall === 'mkdir') return new StartupError(`DATA_DIR ${dataDir} cannot be made (${failed}): its parent takes no new directories; set DATA_DIR to a writable folder`);
  if (!DENIED.has(code)) return new StartupError(`DATA_DIR ${dataDir} cannot be used (${failed})`);
  const { uid, gid } = userInfo();
  return new StartupError(
    `DATA_DIR ${dataDir} is not writable by this process, uid ${uid} gid ${gid} (${failed}): ` +
      `chown -R ${uid}:${gid} the directory (on the host, for a bind mount), or mount a named volume there`,
  );
}
