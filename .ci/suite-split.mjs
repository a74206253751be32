// CI's suite in two runs (.ci/run): `npm test` as a newcomer runs it (no
// services: every test that needs none) and a services stage (the files
// holding tests that need PostgreSQL or Redis, with TEST_SERVICES_ONLY=1 so
// their PGlite halves are not run twice). Both read mocha --dry-run JSON.
//
//   node .ci/suite-split.mjs files FULL NEWCOMER          the services stage's files, one a line
//   node .ci/suite-split.mjs check FULL NEWCOMER SERVICES fails naming every test of FULL neither run holds
//   node .ci/suite-split.mjs twice NEWCOMER SERVICES       a --grep pattern for the services stage's tests the newcomer run holds too
//
// FULL is the suite as CI defines it (CI=true, every service there); a test is
// named by its file and full title.
import { readFileSync } from 'node:fs';

const [command, ...paths] = process.argv.slice(2);
const tests = (path) => JSON.parse(readFileSync(path, 'utf8')).tests;
const key = (test) => `${test.file} | ${test.fullTitle}`;

if (command === 'files' && paths.length === 2) {
  const [full, newcomer] = paths.map(tests);
  const alone = new Set(newcomer.map(key));
  const files = new Set(full.filter((test) => !alone.has(key(test))).map((test) => test.file));
  process.stdout.write([...files].sort().map((file) => `${file}\n`).join(''));
} else if (command === 'check' && paths.length === 3) {
  const [full, newcomer, services] = paths.map(tests);
  const held = new Set([...newcomer, ...services].map(key));
  const missing = full.filter((test) => !held.has(key(test))).map(key);
  if (missing.length) {
    process.stderr.write(`ci: ${missing.length} of the suite's ${full.length} tests run in neither stage:\n${missing.map((m) => `  ${m}\n`).join('')}`);
    process.exit(1);
  }
  process.stdout.write(`ci: the suite's ${full.length} tests: ${newcomer.length} run without services, ${services.length} in the services stage\n`);
} else if (command === 'twice' && paths.length === 2) {
  // The tests of the services' files without a backend loop (a file's CLI
  // or lock tests beside its PostgreSQL ones) are defined in both runs: the
  // services stage leaves them to the newcomer run with `--grep PATTERN
  // --invert` (117 of its 837 tests on 2026-11-29). Whole titles,
  // anchored; a services test dropped by a title it shares with one of them
  // would show in `check`, which reads the services stage's dry run with
  // the same pattern.
  const [newcomer, services] = paths.map(tests);
  const alone = new Set(newcomer.map(key));
  const escape = (title) => title.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const twice = [...new Set(services.filter((test) => alone.has(key(test))).map((test) => test.fullTitle))];
  process.stdout.write(twice.length ? `^(?:${twice.map(escape).join('|')})$` : '');
} else {
  process.stderr.write('usage: suite-split.mjs files FULL NEWCOMER | check FULL NEWCOMER SERVICES | twice NEWCOMER SERVICES\n');
  process.exit(2);
}
