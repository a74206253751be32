// DATA_DIR holds the admin token, the embedded database and the local
// store's objects: nobody but the service's user has any business reading
// them (issue 27: under umask 022 objects and PGlite's files were 0644).
// The folder itself is made 0700, which keeps others out of everything in it
// whatever the modes inside; `dropstream serve` also sets its umask to 077
// (src/cli/index.ts), so files written by code we do not control (PGlite)
// are 0600 too, and the local store asks for 0600 and 0700 explicitly.
import { chmod, stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import { makeDir } from './make-dir.js';

/** The umask `dropstream serve` runs with: files 0600, folders 0700. */
export const SERVICE_UMASK = 0o077;

/**
 * Makes DATA_DIR if needed, and narrows it to 0700 when other users may read
 * or enter it. An existing folder that was wider is worth a warning: what
 * was written there before (by an older version, or by hand) may have been
 * read. A folder the process cannot chmod (owned by another user) is warned
 * about and left.
 */
export async function secureDataDir(dataDir: string, logger: Logger): Promise<void> {
  const existed = await stat(dataDir).then(() => true, () => false);
  await makeDir(dataDir);
  const mode = (await stat(dataDir)).mode & 0o777;
  if ((mode & 0o077) === 0) return;
  const narrowed = await chmod(dataDir, 0o700).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      logger.warn({ data_dir: dataDir, mode: mode.toString(8), err: err.message }, 'DATA_DIR is readable by other users and cannot be narrowed: chmod 700 it');
      return false;
    },
  );
  if (narrowed && existed) {
    logger.warn({ data_dir: dataDir, mode: mode.toString(8) }, 'DATA_DIR was readable by other users: narrowed to 0700 (check who read its files)');
  }
}
