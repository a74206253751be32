// Builds the commit the upgrade test starts from into UPGRADE_CACHE_DIR ahead
// of the test (.ci/run runs this in the background while other steps run);
// the test then finds it ready. Prints one line per step, or one line saying
// why it cannot (a release commit this clone does not hold).
import { buildRelease } from '../helpers/release-build.js';
import { origin } from './origin.js';

try {
  const from = origin();
  const started = Date.now();
  const dir = await buildRelease(from.commit, (line) => console.log(`upgrade-prepare: ${line}`));
  console.log(`upgrade-prepare: ${from.label}, commit ${from.commit.slice(0, 12)}, ready in ${dir} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error(`upgrade-prepare: FAILED: ${(err as Error).message}`);
  process.exit(1);
}
