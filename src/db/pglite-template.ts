// A new embedded database starts as a copy of one made at build time.
// PGlite's own first start runs initdb inside the process: a second
// PostgreSQL instance, a byte copy of its 128 MiB WebAssembly heap restored
// before every step, and the result as a tarball in memory. That took the
// first start to a peak of 530 MiB for PGlite alone (1,065 MiB for the whole
// server before the other fixes), against 140 MiB for opening an existing
// database. `npm run build` (scripts/pglite-template.mjs) pays that once, in
// a process of its own; a first start copies the files, which costs no memory.
import { createRequire } from 'node:module';
import { chmod, cp, mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';

/** dist/ of this package, from src/db or dist/db alike. */
const dist = fileURLToPath(new URL('../../dist/', import.meta.url));
export const templateDir = join(dist, 'pglite-template');
const stampPath = join(dist, 'pglite-template.json');

/** The installed PGlite's version: a template is only used by the version that made it. */
async function pgliteVersion(): Promise<string> {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  let dir = dirname(entry);
  for (;;) {
    const manifest = await readFile(join(dir, 'package.json'), 'utf8').catch(() => undefined);
    if (manifest) {
      const { name, version } = JSON.parse(manifest) as { name?: string; version: string };
      if (name === '@electric-sql/pglite') return version;
    }
    if (dirname(dir) === dir) throw new Error(`no package.json above ${entry}`);
    dir = dirname(dir);
  }
}

/** Raised when templates are made differently, so older ones are made again. */
const FORMAT = 3;

interface Stamp {
  pglite?: string;
  format?: number;
  /** The template's empty folders (pg_tblspc, pg_notify, ...): npm pack leaves empty folders out, and PGlite fails to start without them. */
  emptyDirs?: string[];
}

const readStamp = () => readFile(stampPath, 'utf8').then((s) => JSON.parse(s) as Stamp, () => undefined);

/** The stamp of a template the installed PGlite can use; undefined when there is none. */
async function readyStamp(): Promise<Stamp | undefined> {
  const stamp = await readStamp();
  const ready = stamp?.format === FORMAT && stamp.pglite === (await pgliteVersion()) && (await exists(join(templateDir, 'PG_VERSION')));
  return ready ? stamp : undefined;
}

async function emptyDirsOf(dir: string): Promise<string[]> {
  const empty: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isDirectory() && (await readdir(path)).length === 0) empty.push(relative(dir, path));
  }
  return empty.sort();
}

const exists = (path: string) => stat(path).then(() => true, () => false);

/** Makes dist/pglite-template unless one for the installed PGlite is there; returns whether it made one. */
export async function buildTemplate(): Promise<boolean> {
  if (await readyStamp()) return false;
  const building = `${templateDir}.${process.pid}.tmp`;
  await rm(building, { recursive: true, force: true });
  await mkdir(dirname(building), { recursive: true });
  const pglite = await PGlite.create(building);
  await pglite.close();
  await readableByAll(building);
  await rm(templateDir, { recursive: true, force: true });
  await rename(building, templateDir);
  const stamp: Stamp = { pglite: await pgliteVersion(), format: FORMAT, emptyDirs: await emptyDirsOf(templateDir) };
  await writeFile(stampPath, `${JSON.stringify(stamp)}\n`);
  return true;
}

/**
 * The image is built as root and runs as another user, who must be able to
 * copy every file (PostgreSQL makes a few 0600). Copies get the same modes
 * PGlite's own initdb gives its files.
 */
async function readableByAll(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    await chmod(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
  }
  await chmod(dir, 0o755);
}

/** A copy is the service's own database: 0700 and 0600, as PostgreSQL's initdb makes them (issue 27). */
async function ownerOnly(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    await chmod(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o700 : 0o600);
  }
  await chmod(dir, 0o700);
}

/**
 * Fills the folder `dir` from the template when it holds no database yet
 * (copied next to it, then renamed, so a crash never leaves half a
 * database). Without a template (a build that did not make one), PGlite runs
 * initdb itself as before. The caller holds the folder's lock.
 */
export async function seedFromTemplate(dir: string): Promise<boolean> {
  if (await exists(join(dir, 'PG_VERSION'))) return false;
  const stamp = await readyStamp();
  if (!stamp) return false;
  const copying = `${dir}.seeding`;
  await rm(copying, { recursive: true, force: true });
  await cp(templateDir, copying, { recursive: true });
  // A template installed from a tarball lost its empty folders (npm pack).
  for (const empty of stamp.emptyDirs ?? []) await mkdir(join(copying, empty), { recursive: true });
  await ownerOnly(copying);
  // An empty folder gives way. One with files but no database (an initdb
  // that died) is left to PGlite, as it would be without a template.
  const cleared = await rmdir(dir).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code === 'ENOENT',
  );
  if (!cleared) {
    await rm(copying, { recursive: true, force: true });
    return false;
  }
  await rename(copying, dir);
  return true;
}
