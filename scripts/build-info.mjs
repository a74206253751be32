// The commit a build is made from, for dist/build-info.json (scripts/build.mjs):
// DROPSTREAM_COMMIT when set (the Docker build passes its REVISION argument,
// having no .git), else git's HEAD (12 hex digits) when `root` is the top of a
// git checkout, not a copy unpacked inside some other repository (whose HEAD
// says nothing about it), with `-dirty` when the build's inputs have changes
// not committed; else "unknown" (no git, a `git archive` copy, a tarball).
import { spawnSync } from 'node:child_process';
import { realpathSync } from 'node:fs';

/** @param {string} root the package's folder @param {string[]} inputs paths under it the build reads @param {NodeJS.ProcessEnv} env */
export function buildCommit(root, inputs, env = process.env) {
  if (env.DROPSTREAM_COMMIT) return env.DROPSTREAM_COMMIT;
  const git = (args) => spawnSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const top = git(['rev-parse', '--show-toplevel']);
  if (top.status !== 0 || realpathSync(top.stdout.trim()) !== realpathSync(root)) return 'unknown';
  const head = git(['rev-parse', '--short=12', 'HEAD']);
  if (head.status !== 0) return 'unknown';
  const changed = git(['status', '--porcelain', '--', ...inputs]);
  return head.stdout.trim() + (changed.status === 0 && changed.stdout.trim() ? '-dirty' : '');
}
