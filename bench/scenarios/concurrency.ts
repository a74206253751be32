// Scenario 2: 1, 8 and 32 simultaneous 64 MiB uploads through our service
// into s3rver: total MB/s and the server's peak RSS. 32 is the default
// UPLOAD_CONCURRENCY, so the last case is a server's worth of uploads. They
// come from one account, and one account may take at most three quarters of
// an instance's places (src/limits/upload-gate.ts), so this server has 43 (33 for one
// account): the 32 uploads in flight, and so what is measured, are the same. In full mode the
// same number of simultaneous direct lib-storage uploads (one process) runs
// alternately as the limit; --quick runs our side only, once. After the 32
// uploads our server rests for IDLE_S and its resident memory is read: what
// the allocator and the idle collection give back after the peak. Last, the
// noisy-neighbour case (noisy-neighbour.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { alternate } from '../lib/measure.js';
import { mib } from '../lib/measure.js';
import { currentRss, MiB } from '../lib/proc.js';
import { noisyNeighbour } from './noisy-neighbour.js';
import { directS3Party, dropstreamParty, type UploadSample } from '../lib/uploads.js';

const SIZE = 64 * MiB;
const OURS = 'dropstream';
const DIRECT = 'direct lib-storage';
/** Seconds without a request before the idle figure: the idle collection's 10 s quiet period and then some. */
const IDLE_S = 30;

export async function concurrency(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  await b.s3.admin.createBucket('direct');
  const server = await startOurs(b, 'concurrency', 's3', { env: { UPLOAD_CONCURRENCY: '43' } });
  const out: Comparison[] = [];
  try {
    const parties = [dropstreamParty(OURS, server, b.s3.s3rverPid), ...(b.quick ? [] : [directS3Party(DIRECT, b.s3, 'direct', b.partSize, b.partsInFlight)])];
    await parties[0]!.upload(8 * MiB, 1); // warm-up
    for (const count of [1, 8, 32]) {
      const reps = b.reps ?? (b.quick ? 1 : count === 32 ? 2 : 3);
      const results = await alternate(parties.map((p) => p.label), reps, async (label, rep) => {
        const s = await parties.find((p) => p.label === label)!.upload(SIZE, count);
        log(`  ${count} x 64 MiB #${rep + 1} ${label}: ${s.mb_s} MB/s total, peak RSS ${s.peak_rss_mib} MiB, cpu ${s.party_cpu_pct}%, s3rver ${s.s3rver_cpu_pct}%`);
        return s as unknown as Record<string, number>;
      });
      const sides = parties.map((p) => side(p.label, results[p.label]!));
      const ours = sides[0]!.median as unknown as UploadSample;
      const ratios: Record<string, number> = {};
      if (sides[1]) ratios[`MB/s vs ${DIRECT}`] = ratio(ours.mb_s, sides[1].median.mb_s!);
      const notes: string[] = [];
      if (count === 32) {
        await sleep(IDLE_S * 1000);
        const idle = mib(await currentRss(server.proc.pid));
        log(`  idle ${IDLE_S} s after the 32 uploads: ${idle} MiB`);
        notes.push(`our server idle ${IDLE_S} s after them: ${idle} MiB`);
      }
      out.push({ scenario: 'concurrency', case: `${count} x 64 MiB`, reps, sides, ratios, ...(notes.length ? { notes } : {}) });
    }
    out.push(await noisyNeighbour(server, b.quick, log));
  } finally {
    await server.proc.stop();
  }
  return out;
}
