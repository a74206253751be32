// What the memory knobs cost and buy: our server alone, one run per
// setting, of one 1 GiB upload and of 32 simultaneous 64 MiB uploads (the
// default UPLOAD_CONCURRENCY) into s3rver. Part buffers are
// S3_PARTS_IN_FLIGHT x S3_PART_SIZE per upload; --max-semi-space-size
// caps V8's young generation, whose size decides how many 64 KiB socket
// reads (garbage once copied into a part) wait for a collection.
// Full mode only (about 4 minutes); not part of --quick.
import { side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { MiB } from '../lib/proc.js';
import { dropstreamParty } from '../lib/uploads.js';

const SETTINGS: { label: string; env?: Record<string, string>; nodeFlags?: string[] }[] = [
  { label: 'defaults (8 MiB parts, 2 in flight)' },
  { label: 'defaults, NODE_OPTIONS=--max-semi-space-size=1', nodeFlags: ['--max-semi-space-size=1'] },
  { label: 'S3_PARTS_IN_FLIGHT=1', env: { S3_PARTS_IN_FLIGHT: '1' } },
  {
    label: 'S3_PARTS_IN_FLIGHT=1, S3_PART_SIZE=5 MiB, NODE_OPTIONS=--max-semi-space-size=1',
    env: { S3_PARTS_IN_FLIGHT: '1', S3_PART_SIZE: String(5 * MiB) },
    nodeFlags: ['--max-semi-space-size=1'],
  },
];

export async function knobs(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  if (b.quick) return [];
  const sides = [];
  for (const setting of SETTINGS) {
    // One account may take at most three quarters of an instance's places
    // (src/limits/upload-gate.ts): 43 places give it the 32 the default
    // UPLOAD_CONCURRENCY allows, as in concurrency.ts.
    const server = await startOurs(b, 'knobs', 's3', { ...setting, env: { UPLOAD_CONCURRENCY: '43', ...setting.env } });
    try {
      const party = dropstreamParty(setting.label, server, b.s3.s3rverPid);
      await party.upload(8 * MiB, 1); // warm-up
      const one = await party.upload(1024 * MiB, 1);
      const many = await party.upload(64 * MiB, 32);
      const s = {
        one_gib_mb_s: one.mb_s,
        one_gib_peak_rss_mib: one.peak_rss_mib,
        c32_mb_s: many.mb_s,
        c32_peak_rss_mib: many.peak_rss_mib,
        idle_peak_rss_mib: Math.round((server.startupPeakRss / MiB) * 10) / 10,
      };
      log(`  ${setting.label}: 1 GiB ${s.one_gib_mb_s} MB/s, peak ${s.one_gib_peak_rss_mib} MiB; 32 x 64 MiB ${s.c32_mb_s} MB/s, peak ${s.c32_peak_rss_mib} MiB`);
      sides.push(side(setting.label, [s]));
    } finally {
      await server.proc.stop();
    }
  }
  return [{ scenario: 'knobs', case: 'S3, our server alone', reps: 1, sides, ratios: {} }];
}
