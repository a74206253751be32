// Uploads straight to the store (issue 55): our service's direct upload
// (a client creating it, PUTting the parts to the signed URLs and
// completing it) against the limit, lib-storage straight into the same
// s3rver, with the same part size and parts in flight. The server's CPU per
// GB is beside it: the claim is that an instance spends next to nothing on
// bytes it never sees.
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { alternate, watch } from '../lib/measure.js';
import { MiB } from '../lib/proc.js';
import { directS3Party, dropstreamDirectParty } from '../lib/uploads.js';
import { uploadSizes } from './uploads.js';

const OURS = 'dropstream direct';
const DIRECT_S3 = 'direct lib-storage';
/** Seconds the server's idle CPU is read over. */
const IDLE_S = 10;

export async function direct(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  await b.s3.admin.createBucket('direct-limit');
  const ours = await startOurs(b, 'direct', 's3', { env: { S3_DIRECT_UPLOADS: 'true' } });
  const out: Comparison[] = [];
  try {
    // The server's own CPU at rest, over as long as an upload takes: what the uploads' share is measured above.
    const idle = (await watch({ server: ours.proc.pid }, () => sleep(IDLE_S * 1000))).watch.cpuPct.server!;
    log(`  direct: the server idles at ${idle}% of a core`);
    const parties = [dropstreamDirectParty(OURS, ours, b.s3.s3rverPid, b.partSize, b.partsInFlight, idle), directS3Party(DIRECT_S3, b.s3, 'direct-limit', b.partSize, b.partsInFlight)];
    for (const p of parties) await p.upload(16 * MiB, 1); // warm-up, not measured
    for (const size of uploadSizes(b)) {
      const reps = b.reps ?? (b.quick ? 2 : size <= 64 * MiB ? 5 : 3);
      const results = await alternate(parties.map((p) => p.label), reps, async (label, rep) => {
        const s = (await parties.find((p) => p.label === label)!.upload(size, 1)) as unknown as Record<string, number>;
        log(`  direct ${size / MiB} MiB #${rep + 1} ${label}: ${s.mb_s} MB/s, cpu ${s.party_cpu_pct}%${s.server_cpu_pct === undefined ? '' : `, server ${s.server_cpu_pct}% (${s.server_core_s_per_gb} core-s/GB)`}, s3rver ${s.s3rver_cpu_pct}%`);
        return s;
      });
      const sides = parties.map((p) => side(p.label, results[p.label]!));
      const oursMedian = sides[0]!.median;
      out.push({
        scenario: 'direct',
        case: `s3, ${size / MiB} MiB`,
        reps,
        sides,
        ratios: { [`MB/s vs ${DIRECT_S3}`]: ratio(oursMedian.mb_s!, sides[1]!.median.mb_s!) },
        notes: [`the service's CPU: ${oursMedian.server_core_s_per_gb} core-seconds per GB above its idle ${idle}% of a core (median; ${oursMedian.server_cpu_pct}% of a core during the upload)`],
      });
    }
  } finally {
    await ours.proc.stop();
  }
  return out;
}
