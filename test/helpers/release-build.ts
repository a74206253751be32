// Another commit of this repository, built to run beside this one (the
// upgrade test, test/upgrade/): its files as git holds them (`git archive`,
// so the checkout is untouched and no worktree is registered), its
// dependencies (`npm ci`, whose postinstall builds dist/; or, when its
// package-lock.json is this checkout's, a copy of our node_modules and its own
// `scripts/build.mjs`), in `<cache>/<commit>`. A build that
// finished is marked `.ready` and reused by later runs with the same cache
// (one without the mark is begun again):
// .ci/upgrade gives each CI run a cache of its own and removes it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repositoryRoot } from './releases.js';

/** Where builds are kept: UPGRADE_CACHE_DIR, else a folder under the system's temporary one. */
export const releaseCache = () => process.env.UPGRADE_CACHE_DIR || join(tmpdir(), 'dropstream-release-builds');

function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; shell?: boolean }): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited ${code} in ${options.cwd}:\n${output.slice(-4000)}`))));
  });
}

/** The built tree of `commit` (a full hash): its bin/dropstream.js runs that version. */
export async function buildRelease(commit: string, log: (line: string) => void = () => {}): Promise<string> {
  const dir = join(releaseCache(), commit);
  if (existsSync(join(dir, '.ready'))) {
    log(`using the build of ${commit.slice(0, 12)} in ${dir}`);
    return dir;
  }
  // Built where it will run (a build may record its own path), and marked ready last: a build cut short is begun again.
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  let started = Date.now();
  await run('sh', ['-c', `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, 'sh', repositoryRoot, commit, dir], { cwd: repositoryRoot });
  log(`git archive ${commit.slice(0, 12)}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  started = Date.now();
  // DROPSTREAM_COMMIT names the commit for builds that record it.
  const env = { ...process.env, DROPSTREAM_COMMIT: commit.slice(0, 12) };
  const lock = (root: string) => readFile(join(root, 'package-lock.json'), 'utf8').catch(() => undefined);
  const [theirs, ours] = await Promise.all([lock(dir), lock(repositoryRoot)]);
  if (theirs !== undefined && theirs === ours && existsSync(join(repositoryRoot, 'node_modules', '.package-lock.json'))) {
    // The same lockfile: npm ci would make the tree this checkout already has
    // (55-60 s on a busy two-core machine, against about 11 s for a copy).
    // A copy, not links: nothing the other build does can touch ours.
    await run('cp', ['-a', join(repositoryRoot, 'node_modules'), join(dir, 'node_modules')], { cwd: dir });
    await run(process.execPath, ['scripts/build.mjs'], { cwd: dir, env });
    log(`node_modules copied (same package-lock.json) and ${commit.slice(0, 12)} built: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } else {
    // Its own postinstall builds its dist/.
    await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], { cwd: dir, env });
    log(`npm ci (and its build) of ${commit.slice(0, 12)}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  if (!existsSync(join(dir, 'dist', 'cli', 'index.js'))) throw new Error(`the build of ${commit} made no dist/cli/index.js`);
  await writeFile(join(dir, '.ready'), `${new Date().toISOString()}\n`);
  return dir;
}
