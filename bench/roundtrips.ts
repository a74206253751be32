// `npx tsx bench/roundtrips.ts [--entry DIR] [--requests N] [--json FILE]`
//
// Counts the SQL statements and Redis commands per request of our server
// (bench/lib/roundtrips.ts) and prints a markdown table. --entry runs another
// build (a folder with dist/ and prisma/, as bench/compare-builds.ts takes),
// e.g. one saved before a change; --json writes the counts, and --before
// FILE (such a JSON) adds the earlier counts as columns.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REDIS_URL } from './lib/dropstream.js';
import { dropstreamRoundTrips, roundTripDetails, roundTripTable, type RoundTripCount } from './lib/roundtrips.js';

const { values } = parseArgs({ options: { entry: { type: 'string' }, requests: { type: 'string' }, json: { type: 'string' }, before: { type: 'string' } } });
const workDir = await mkdtemp(join(tmpdir(), 'dropstream-roundtrips-'));
try {
  const counts = await dropstreamRoundTrips({
    redisUrl: REDIS_URL,
    redisKeyPrefix: `dropstream-rt-${process.pid}`,
    workDir,
    entry: values.entry ? join(values.entry, 'dist', 'cli', 'index.js') : undefined,
    requests: values.requests ? Number(values.requests) : undefined,
  });
  const before = values.before ? (JSON.parse(await readFile(values.before, 'utf8')) as RoundTripCount[]) : undefined;
  console.log([...roundTripTable(counts, before), '', ...roundTripDetails(counts)].join('\n'));
  if (values.json) await writeFile(values.json, JSON.stringify(counts, null, 2));
} finally {
  await rm(workDir, { recursive: true, force: true });
}
