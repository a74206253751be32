// Finding the last release (test/helpers/releases.ts), which the migration
// rule and the upgrade test compare this commit with: from a tag where the
// clone has tags, from CHANGELOG.md's heading where it has not (CI's clone).
import { expect } from 'chai';
import { changelogReleases, previousRelease, releases, resolveCommit } from '../helpers/releases.js';

describe('releases: which one this commit upgrades from', () => {
  it("when CHANGELOG.md's headings are read, then each release's version and commit, and not Unreleased", () => {
    const text = '# Changelog\n\n## Unreleased\n\n## 0.2.0 - 2026-12-20 (commit 0a1b2c3d)\n\n### Operators\n- x\n\n## 0.1.0 - 2026-11-29 (commit 2587b39)\n';
    expect(changelogReleases(text)).to.deep.equal([
      { version: '0.2.0', commit: '0a1b2c3d' },
      { version: '0.1.0', commit: '2587b39' },
    ]);
  });

  it('when the newest release is this very commit, then the one before it', () => {
    const head = resolveCommit('HEAD')!;
    const first = resolveCommit('2587b39')!;
    const found = previousRelease([
      { version: '0.2.0', commit: head, source: 'changelog' },
      { version: '0.1.0', commit: first.slice(0, 7), source: 'changelog' },
    ]);
    expect(found).to.deep.include({ version: '0.1.0', commit: first });
  });

  it('when the release names a commit this clone does not hold, then one line says which and how to fetch it', () => {
    expect(() => previousRelease([{ version: '9.9.9', commit: 'deadbeefdeadbeef', source: 'changelog' }])).to.throw(
      'the last release, 9.9.9, is commit deadbeefdeadbeef (from the changelog), which this clone does not hold: a shallow clone?',
    );
  });

  it('when a tag and the changelog name one commit, then the tag; when they differ, it refuses to choose', () => {
    const tags = [{ tag: 'v0.1.0', commit: '2587b39cbeb0aaaa' }, { tag: 'v0.0.9', commit: '1111111111' }, { tag: 'vnext', commit: '2222222222' }];
    expect(releases('## 0.1.0 - 2026-11-29 (commit 2587b39)\n', tags)).to.deep.equal([
      { version: '0.1.0', commit: '2587b39cbeb0aaaa', source: 'tag' },
      { version: '0.0.9', commit: '1111111111', source: 'tag' },
    ]);
    expect(() => releases('## 0.1.0 - 2026-11-29 (commit 0000000)\n', tags)).to.throw("the tag v0.1.0 is commit 2587b39cbeb0 but CHANGELOG.md's heading for 0.1.0 names 0000000: correct one of them");
  });
});
