// mkdir -p that always ends. Node's `mkdir(path, { recursive: true })` loops
// forever where a parent exists but refuses new entries with ENOENT instead of
// EACCES (`/proc`, some FUSE and overlay mounts): it sees ENOENT, makes the
// parent (EEXIST), tries again, and so on (DATA_DIR=/proc/dropstream printed
// nothing and made ~7,000 mkdir calls in 8 s). Here each missing level is made
// once, and an ENOENT under a parent that exists is an error naming the path.
import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';

export async function makeDir(path: string): Promise<void> {
  const missing: string[] = [];
  for (let dir = resolve(path); ; dir = dirname(dir)) {
    const found = await stat(dir).then(
      (s) => s,
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        // A file where a folder should be, higher up: said as mkdir would say it.
        if (err.code === 'ENOTDIR') throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: dir });
        throw err;
      },
    );
    if (found) {
      if (!found.isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: dir });
      break;
    }
    missing.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of missing) {
    await mkdir(dir).catch((err: NodeJS.ErrnoException) => {
      // Made by another process meanwhile (replicas sharing a volume start together).
      if (err.code !== 'EEXIST') throw err;
    });
  }
}
