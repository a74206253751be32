// How the local store (local.ts) makes a name it gives a file survive a
// power cut. A file row commits once the store has answered, so what the
// row names must be on the disk by then: the file's bytes (fdatasync before
// the rename: local-append.ts) and the directory entries that lead to it.
// A rename, or a file or directory created, is durable only once the
// directory that holds the new entry is fsynced (ext4, xfs: rename(2) is
// atomic, not durable).
import { constants } from 'node:fs';
import { type FileHandle, mkdir, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Bounded } from './local-append.js';

/** How the store syncs: each call within its deadline, and how it opens a directory (fs/promises open; tests give one that hangs). */
export interface Syncing {
  bound: Bounded;
  openFile: (path: string, flags: number, mode: number) => Promise<FileHandle>;
}

/**
 * Creates `dir` and any missing parents, and syncs every directory that got
 * a new entry: nothing when all were there.
 */
export async function mkdirDurable(dir: string, fs: Syncing): Promise<void> {
  const created = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (created !== undefined) await syncDirs(createdEntries(created, dir), fs);
}

/**
 * Renames `from` (a file whose bytes are synced) to `to`, creating the
 * directories on the way, and returns once the new name is durable.
 */
export async function renameDurable(from: string, to: string, fs: Syncing): Promise<void> {
  const dir = dirname(to);
  const created = await mkdir(dir, { recursive: true, mode: 0o700 });
  await rename(from, to);
  await syncDirs(created === undefined ? [dir] : [...createdEntries(created, dir), dir], fs);
}

/** Fsyncs the directory `dir`, so the entries made in it survive a crash. */
export async function syncDir(dir: string, { bound, openFile }: Syncing): Promise<void> {
  const handle = await openFile(dir, constants.O_RDONLY | constants.O_DIRECTORY, 0);
  let synced = false;
  try {
    await bound('fsync', 0, () => handle.sync());
    synced = true;
  } finally {
    // A close waits for a sync still in the kernel: past the deadline, answer without it.
    const closed = handle.close().catch(() => undefined);
    if (synced) await closed;
  }
}

async function syncDirs(dirs: string[], fs: Syncing): Promise<void> {
  for (const dir of new Set(dirs)) await syncDir(dir, fs);
}

/**
 * The directories holding entries that `mkdir -p dir` made, `created` being
 * the first one it made: its parent, then each directory it made down to
 * `dir`'s parent (`dir`'s own entries are new only once something is put in it).
 */
function createdEntries(created: string, dir: string): string[] {
  const dirs: string[] = [];
  for (let at = dirname(dir); at.length >= created.length; at = dirname(at)) dirs.unshift(at);
  dirs.unshift(dirname(created));
  return dirs;
}
