// Resumable uploads through a connection that dies (issue 19): tus-js-client
// with its default retry delays sends the whole file in one PATCH through a
// proxy that cuts the connection once, silently (only the client's side goes;
// the server's stays open and hears nothing) or by a reset (both sides go).
// Ours (local store, S3) against tus-node-server (@tus/file-store,
// @tus/s3-store). Measured: what the client sent beyond the file's size, the
// seconds from the cut to the PATCH that resumed (the takeover) and to
// tus-js-client's success (that adds the rest of the file at each server's
// speed). Runs in this process
// (tsx): the figures are bytes and seconds, not the client's memory.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Upload } from 'tus-js-client';
import { startCuttingProxy } from '../../test/helpers/cutting-proxy.js';
import { side, startOurs, type Bench, type Comparison } from '../lib/context.js';
import { auth, deleteFile, headDownload, type Dropstream } from '../lib/dropstream.js';
import { alternate, round } from '../lib/measure.js';
import { MiB } from '../lib/proc.js';
import { startTus, startTusFiles, type Running } from '../lib/servers.js';
import { check, type S3Context } from '../lib/uploads.js';

const KINDS = ['silent', 'reset'] as const;
type Kind = (typeof KINDS)[number];

interface CutSample {
  /** What the client sent beyond the file's size, in % of it. */
  resent_pct: number;
  /** From the cut to the start of the PATCH that finished the upload: the takeover's cost. */
  resume_after_cut_s: number;
  finish_after_cut_s: number;
  seconds: number;
}

interface CutParty {
  label: string;
  /** The creation endpoint, on `base` (the proxy's address). */
  endpoint(base: string): string;
  target: string;
  headers: Record<string, string>;
  /** Checks what the upload at `url` (on the proxy) became, then removes it where that is ours. */
  verify(url: string, data: Buffer): Promise<void>;
}

/** One upload of `data` through a proxy cutting at a third; the sample. */
async function cutRun(party: CutParty, kind: Kind, data: Buffer): Promise<CutSample> {
  const proxy = await startCuttingProxy(party.target, [Math.floor(data.length / 3)], { silent: kind === 'silent' });
  const started = Date.now();
  let lastPatch = 0;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const upload = new Upload(data, {
        endpoint: party.endpoint(proxy.url),
        headers: party.headers,
        metadata: { filename: 'cut.bin' },
        onBeforeRequest: (req) => void (req.getMethod() === 'PATCH' && (lastPatch = Date.now())),
        onError: reject,
        onSuccess: () => resolve(upload.url!),
      });
      upload.start();
    });
    const done = Date.now();
    check(proxy.cuts() === 1, `${party.label} (${kind}): ${proxy.cuts()} cuts`);
    await party.verify(url, data);
    const cut = proxy.cutAt()!;
    return {
      resent_pct: round((proxy.relayed() / data.length - 1) * 100, 3),
      resume_after_cut_s: round((lastPatch - cut) / 1000, 2),
      finish_after_cut_s: round((done - cut) / 1000, 2),
      seconds: round((done - started) / 1000, 2),
    };
  } finally {
    await proxy.close();
  }
}

function ours(label: string, server: Dropstream): CutParty {
  return {
    label,
    target: server.url,
    endpoint: (base) => `${base}/api/v1/uploads`,
    headers: auth(server),
    async verify(url, data) {
      const res = await fetch(`${server.url}${new URL(url).pathname}`, { headers: auth(server) });
      const { file } = (await res.json()) as { file: { file_id: number; public_link: string; size: number } | null };
      check(file?.size === data.length, `${label} made no file of ${data.length} bytes`);
      const stored = await headDownload(server, file!.public_link);
      check(stored.etag === `"${createHash('sha256').update(data).digest('hex')}"`, `${label} stored different bytes (ETag ${stored.etag})`);
      await deleteFile(server, file!.file_id);
    },
  };
}

function peer(label: string, tus: Running, size: (id: string) => Promise<number | undefined>): CutParty {
  return {
    label,
    target: new URL(tus.url).origin,
    endpoint: (base) => `${base}${new URL(tus.url).pathname}`,
    headers: {},
    async verify(url, data) {
      const id = new URL(url).pathname.split('/').at(-1)!;
      check((await size(id)) === data.length, `${label}: upload ${id} is not ${data.length} bytes`);
    },
  };
}

export async function resumableCuts(b: Bench, log: (s: string) => void, s3: S3Context): Promise<Comparison[]> {
  const size = (b.quick ? 128 : 256) * MiB;
  const reps = b.reps ?? (b.quick ? 1 : 3);
  const data = randomBytes(size);
  const out: Comparison[] = [];
  for (const store of ['local', 's3'] as const) {
    const server = await startOurs(b, 'resumable-cuts', store);
    const folder = join(b.workDir, 'tus-file-store');
    await mkdir(folder, { recursive: true });
    const bucket = 'tus-cuts';
    if (store === 's3') await s3.admin.createBucket(bucket);
    const tus = store === 's3' ? await startTus(s3.endpoint, bucket, b.workDir) : await startTusFiles(folder);
    const parties = [
      ours(`dropstream tus (${store})`, server),
      peer(`tus-node-server (${store === 's3' ? '@tus/s3-store' : '@tus/file-store'})`, tus, store === 's3' ? (id) => s3.admin.size(bucket, id) : async (id) => (await stat(join(folder, id))).size),
    ];
    try {
      for (const kind of KINDS) {
        const results = await alternate(parties.map((p) => p.label), reps, async (label, rep) => {
          const s = await cutRun(parties.find((p) => p.label === label)!, kind, data);
          log(`  ${store} ${kind} cut #${rep + 1} ${label}: resent ${s.resent_pct}% of the file, resumed ${s.resume_after_cut_s} s and finished ${s.finish_after_cut_s} s after the cut`);
          return s as unknown as Record<string, number>;
        });
        const sides = parties.map((p) => side(p.label, results[p.label]!));
        out.push({ scenario: 'resumable-cuts', case: `${store}, ${kind} cut, ${size / MiB} MiB`, reps, sides, ratios: {} });
      }
    } finally {
      await tus.proc.stop();
      await server.proc.stop();
    }
  }
  return out;
}
