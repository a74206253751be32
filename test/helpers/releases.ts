// The project's releases, for the tests that compare this commit with the
// last release (the migration rule, test/release/expand-only.test.ts; the
// upgrade test, test/upgrade/). A release is a tag `vX.Y.Z` where the clone
// has tags, and always a heading of CHANGELOG.md, `## X.Y.Z - date (commit
// abc1234)`, because tags do not travel with every clone (CI's has none).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface Release {
  version: string;
  /** The full commit hash. */
  commit: string;
  /** Where it was found: the tag, or CHANGELOG.md's heading when the clone has no such tag. */
  source: 'tag' | 'changelog';
}

const SEMVER = /^(\d+)\.(\d+)\.(\d+)$/;

/** Compares two X.Y.Z versions (negative when a is older). */
export function compareVersions(a: string, b: string): number {
  const [pa, pb] = [SEMVER.exec(a), SEMVER.exec(b)];
  if (!pa || !pb) throw new Error(`not a version X.Y.Z: ${pa ? b : a}`);
  for (let i = 1; i <= 3; i++) {
    const d = Number(pa[i]) - Number(pb[i]);
    if (d !== 0) return d;
  }
  return 0;
}

/** The releases CHANGELOG.md's headings name, newest first as written: `## 0.1.0 - 2026-11-29 (commit 2587b39)`. */
export function changelogReleases(text: string): { version: string; commit: string }[] {
  return [...text.matchAll(/^## (\d+\.\d+\.\d+) - \d{4}-\d{2}-\d{2} \(commit ([0-9a-f]{7,40})\)\s*$/gm)].map((m) => ({ version: m[1]!, commit: m[2]! }));
}

/** git in the repository; undefined when git fails (no git, not a checkout, an unknown object). */
export function git(args: string[], cwd = repositoryRoot): string | undefined {
  try {
    return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * 1024 * 1024 }).trim();
  } catch {
    return undefined;
  }
}

/** The full hash of a commit this clone holds, or undefined. */
export const resolveCommit = (commitish: string): string | undefined => git(['rev-parse', '--verify', '--quiet', `${commitish}^{commit}`]);

/**
 * Every release, newest first: the tags `vX.Y.Z` this clone has and the
 * changelog's headings, one entry per version (the tag's commit where there
 * is a tag). A tag and a heading that name different commits are an error:
 * one of them is wrong, and a test must not pick between them silently.
 */
export function releases(changelog = readFileSync(`${repositoryRoot}CHANGELOG.md`, 'utf8'), tags = localTags()): Release[] {
  const byVersion = new Map<string, Release>();
  for (const { version, commit } of changelogReleases(changelog)) byVersion.set(version, { version, commit, source: 'changelog' });
  for (const { tag, commit } of tags) {
    const version = tag.slice(1);
    if (!SEMVER.test(version)) continue;
    const heading = byVersion.get(version);
    if (heading && !commit.startsWith(heading.commit)) {
      throw new Error(`the tag ${tag} is commit ${commit.slice(0, 12)} but CHANGELOG.md's heading for ${version} names ${heading.commit}: correct one of them`);
    }
    byVersion.set(version, { version, commit, source: 'tag' });
  }
  return [...byVersion.values()].sort((a, b) => compareVersions(b.version, a.version));
}

/** The tags vX.Y.Z this clone has, with their commits. */
export function localTags(): { tag: string; commit: string }[] {
  return (git(['tag', '--list', 'v*']) ?? '')
    .split('\n')
    .filter((tag) => SEMVER.test(tag.slice(1)))
    .flatMap((tag) => {
      const commit = git(['rev-list', '-n', '1', tag]);
      return commit ? [{ tag, commit }] : [];
    });
}

/**
 * The release this commit upgrades from: the newest one not at HEAD itself
 * (a clone of the release's own commit upgrades from the one before), its
 * commit resolved to a full hash. Throws one line saying what is missing.
 */
export function previousRelease(all = releases()): Release & { commit: string } {
  const head = resolveCommit('HEAD');
  const candidates = all.filter((r) => !head || !head.startsWith(r.commit));
  const release = candidates[0];
  if (!release) throw new Error('no release before this commit: neither a tag vX.Y.Z nor a CHANGELOG.md heading "## X.Y.Z - YYYY-MM-DD (commit abc1234)" names one');
  const commit = resolveCommit(release.commit);
  if (!commit) {
    throw new Error(
      `the last release, ${release.version}, is commit ${release.commit} (from the ${release.source}), which this clone does not hold: a shallow clone? (git fetch --unshallow, or git fetch origin ${release.commit})`,
    );
  }
  return { ...release, commit };
}

/** The migration folders (prisma/migrations/<name>) a commit has, by git. */
export function migrationsAt(commit: string): { name: string; sql: string }[] {
  const listing = git(['ls-tree', '--name-only', `${commit}:prisma/migrations`]);
  if (listing === undefined) throw new Error(`git cannot list prisma/migrations at ${commit}`);
  return listing
    .split('\n')
    .filter((name) => /^\d{14}_/.test(name))
    .sort()
    .map((name) => ({ name, sql: git(['show', `${commit}:prisma/migrations/${name}/migration.sql`]) ?? '' }));
}
