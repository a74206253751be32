// Headless Chromium, for the tests that open a page the way a browser does.
// CI installs Debian's package (.ci/clients.sh); a newcomer's machine may not
// have one, and `npm test` must pass there (issue 37): those tests are left
// out and named in the "Did not run" summary. CI=true refuses to leave them
// out, as it refuses to run without its services.
import { existsSync } from 'node:fs';
import { notRun } from './not-run.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** `it(title, fn)` where Chromium is installed; elsewhere named under "Did not run". */
export function itWithChromium(title: string, fn: Mocha.AsyncFunc): void {
  if (existsSync(CHROMIUM)) {
    it(title, fn);
    return;
  }
  if (process.env.CI) throw new Error(`CI must have Chromium at ${CHROMIUM} for "${title}": apt-get install chromium (see .ci/clients.sh)`);
  notRun(`${CHROMIUM} is missing: "${title}"`, 'apt-get install chromium (or CHROMIUM_PATH=<a Chromium>), then npm test');
}
