// Resumable uploads (tus, 64 MiB PATCHes, and the whole file in one PATCH as
// tus-js-client and our CLI send it) against the plain multipart upload of
// the same bytes, into the same server, on S3 and on the local store:
// throughput ratio (target >= 0.9x) and the server's peak RSS. Each PATCH
// ends by waiting for its parts to be stored (the offset it reports must be
// durable), a pause of about partsInFlight x partSize at s3rver's speed.
// Then the same through a cut connection (resumable-cuts.ts).
import { ratio, side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { auth, deleteFile, headDownload, type Dropstream } from '../lib/dropstream.js';
import { sha256Of } from '../lib/bytes.js';
import { alternate, watch } from '../lib/measure.js';
import { MiB } from '../lib/proc.js';
import { accepted, check, client, dropstreamParty, sample, type UploadParty, type UploadSample } from '../lib/uploads.js';
import { resumableCuts } from './resumable-cuts.js';

const PLAIN = 'dropstream multipart';
const CHUNK = 64 * MiB;
const TUS = `dropstream tus, ${CHUNK / MiB} MiB PATCHes`;
const TUS_ONE = 'dropstream tus, one PATCH';

/** Our tus routes: POST, then PATCHes of `chunk` bytes; checks the file's size and SHA-256, then deletes it. */
export function tusParty(label: string, server: Dropstream, chunk: number, s3rverPid?: number): UploadParty {
  return {
    label,
    async upload(size, count) {
      const pids: Record<string, number> = { party: server.proc.pid, ...(s3rverPid ? { s3rver: s3rverPid } : {}) };
      const { result, watch: w } = await watch(pids, () => client({ mode: 'tus', url: `${server.url}/api/v1/uploads`, headers: auth(server), size, count, chunk }));
      accepted(result, label);
      for (const u of result.uploads) {
        const res = await fetch(u.location!, { headers: auth(server) });
        const { file } = (await res.json()) as { file: { file_id: number; public_link: string; size: number } | null };
        check(file?.size === size, `${label} made no file of ${size} bytes`);
        const stored = await headDownload(server, file!.public_link);
        check(stored.etag === `"${sha256Of(size)}"`, `${label} stored different bytes (ETag ${stored.etag})`);
        await deleteFile(server, file!.file_id);
      }
      return sample(size * count, result.wall, w.peakRssMib.party! * 1024 * 1024, w.cpuPct.party!, w, result.cpu_s);
    },
  };
}

function sizes(b: Bench): number[] {
  return b.sizes ?? (b.quick ? [256] : [1024, 5120]).map((m) => m * MiB);
}

const repsFor = (b: Bench, size: number) => b.reps ?? (b.quick ? 2 : size <= 1024 * MiB ? 3 : 1);

export async function resumable(b: Bench, log: (s: string) => void): Promise<Comparison[]> {
  const out: Comparison[] = [];
  for (const store of ['s3', 'local'] as const) {
    const server = await startOurs(b, 'resumable', store);
    const s3rver = store === 's3' ? b.s3.s3rverPid : undefined;
    const parties = [tusParty(TUS, server, CHUNK, s3rver), dropstreamParty(PLAIN, server, s3rver), tusParty(TUS_ONE, server, Number.MAX_SAFE_INTEGER, s3rver)];
    try {
      for (const p of parties) await p.upload(8 * MiB, 1); // warm-up, not measured
      for (const size of sizes(b)) {
        const reps = repsFor(b, size);
        const results = await alternate(parties.map((p) => p.label), reps, async (label, rep) => {
          const s = await parties.find((p) => p.label === label)!.upload(size, 1);
          log(`  ${store} ${size / MiB} MiB #${rep + 1} ${label}: ${s.mb_s} MB/s, peak RSS ${s.peak_rss_mib} MiB, cpu ${s.party_cpu_pct}%`);
          return s as unknown as Record<string, number>;
        });
        const sides = parties.map((p) => side(p.label, results[p.label]!));
        const [tus, plain, one] = sides.map((s) => s.median as unknown as UploadSample);
        const ratios = { [`MB/s vs ${PLAIN}`]: ratio(tus!.mb_s, plain!.mb_s), [`${TUS_ONE}: MB/s vs ${PLAIN}`]: ratio(one!.mb_s, plain!.mb_s) };
        out.push({ scenario: 'resumable', case: `${store}, ${size / MiB} MiB`, reps, sides, ratios });
      }
    } finally {
      await server.proc.stop();
    }
  }
  // Then through a connection that dies, against tus-node-server (resumable-cuts.ts).
  out.push(...(await resumableCuts(b, log, b.s3)));
  return out;
}
