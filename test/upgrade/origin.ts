// The commit the upgrade test starts from: UPGRADE_FROM (any commit of this
// clone, e.g. to show the test failing on an older behaviour), else the last
// release (test/helpers/releases.ts).
import { previousRelease, resolveCommit } from '../helpers/releases.js';

export function origin(): { label: string; commit: string } {
  const from = process.env.UPGRADE_FROM;
  if (from) {
    const commit = resolveCommit(from);
    if (!commit) throw new Error(`UPGRADE_FROM=${from} is not a commit of this clone`);
    return { label: `UPGRADE_FROM ${from}`, commit };
  }
  const release = previousRelease();
  return { label: `release ${release.version} (from its ${release.source})`, commit: release.commit };
}
