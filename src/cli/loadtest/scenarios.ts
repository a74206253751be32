// The work itself: `concurrency` workers taking operations from one shared
// budget (the count) until it is spent or the time is up, and slow clients
// beside them until the workers are done.
import { setTimeout as sleep } from 'node:timers/promises';
import { apiUrl } from '../transfer-http.js';
import type { LoadtestOptions, MixKind } from './options.js';
import { downloadFile, plainUpload, send, type Target, type Uploaded } from './requests.js';
import { resumableUpload, type TusLeftovers } from './resumable.js';
import { CliError } from '../cli-error.js';
import { directOffered, directUpload } from './direct.js';

export interface Workload {
  options: LoadtestOptions;
  target: Target;
  /** The server, or the cutting proxy in front of it (resumable with --cut-every). */
  tusVia: URL;
  /** Files this run uploaded (downloads read them; cleanup deletes them). */
  files: Uploaded[];
  /** tus uploads the throttled run left to the cleanup. */
  tus: TusLeftovers;
  /** Uploads straight to the store begun and not finished (their paths): aborted by the cleanup. */
  direct: string[];
}

const METADATA = ['/api/v1/files?limit=20', '/api/v1/stats', 'info'] as const;

async function metadataRequest(work: Workload, i: number): Promise<void> {
  const which = METADATA[i % METADATA.length]!;
  const file = work.files[i % Math.max(1, work.files.length)];
  if (which === 'info' && !file) return metadataRequest(work, i + 1);
  const path = which === 'info' ? `/api/v1/files/${file!.id}` : which;
  const kind = which === 'info' ? 'info' : which.startsWith('/api/v1/stats') ? 'stats' : 'list';
  await send(work.target, { kind, method: 'GET', url: apiUrl(work.target.server, path) });
}

function pick(mix: Record<MixKind, number>): MixKind {
  const entries = Object.entries(mix) as [MixKind, number][];
  let r = Math.random() * entries.reduce((sum, [, w]) => sum + w, 0);
  for (const [kind, weight] of entries) {
    r -= weight;
    if (r < 0) return kind;
  }
  return entries.find(([, w]) => w > 0)![0];
}

const randomFile = (files: Uploaded[]) => files[Math.floor(Math.random() * files.length)];

async function operation(work: Workload, kind: MixKind, i: number): Promise<void> {
  const { options, target, files } = work;
  if (kind === 'uploads' || (kind === 'downloads' && files.length === 0)) {
    const file = await plainUpload(target, options.size);
    if (file) files.push(file);
  } else if (kind === 'resumable') {
    const file = await resumableUpload(target, work.tusVia, options.size, work.tus, work.tusVia !== options.server);
    if (file) files.push(file);
  } else if (kind === 'direct') {
    const file = await directUpload(target, options.size, work.direct);
    if (file) files.push(file);
  } else if (kind === 'downloads') await downloadFile(target, randomFile(files)!, options.range);
  else await metadataRequest(work, i);
}

/** While the run lasts: before the deadline, and not refused until after it (then the rest would only meet the gate). */
const running = (target: Target) => Date.now() < target.deadline && !target.signal.aborted && target.gate.heldUntil <= target.deadline;

/** Files to download or ask about before the measured part starts: one per worker, at most the count. */
export async function prepare(work: Workload): Promise<void> {
  const { scenario, concurrency, count, size, mix, mixGiven } = work.options;
  // Direct uploads where the server offers them: asked once (a request of the run).
  if (scenario === 'direct' || (scenario === 'mixed' && (!mixGiven || mix.direct > 0))) {
    const offered = await directOffered(work.target);
    if (!offered && (scenario === 'direct' || mix.direct > 0)) {
      throw new CliError(`${work.target.server.origin} does not offer uploads straight to its store (GET /api/v1/uploads/direct did not answer 200; S3_DIRECT_UPLOADS): nothing to run for ${scenario === 'direct' ? 'direct' : '--mix direct'}`);
    }
    if (offered && !mixGiven) mix.direct = 1;
  }
  const needs = scenario === 'downloads' || scenario === 'metadata' || scenario === 'slow' ? Math.min(concurrency, count) : 0;
  await Promise.all(
    Array.from({ length: needs }, async () => {
      const file = await plainUpload(work.target, size, 'setup upload');
      if (file) work.files.push(file);
    }),
  );
}

/** Runs the scenario's workers; resolves when the count is spent or the deadline passed. */
export async function runWorkers(work: Workload): Promise<number> {
  const { scenario, concurrency, count, rate, mix } = work.options;
  if (scenario === 'slow') {
    // Only slow clients: they run until the deadline.
    await sleep(Math.max(0, work.target.deadline - Date.now()), undefined, { signal: work.target.signal }).catch(() => {});
    return 0;
  }
  let next = 0;
  const began = Date.now();
  const worker = async () => {
    while (running(work.target)) {
      const i = next++;
      if (i >= count) return;
      if (scenario === 'metadata') {
        // A target rate, not as fast as possible: request i is due at i / rate seconds.
        const due = began + (i / rate) * 1000;
        if (due > Date.now()) await sleep(due - Date.now());
      }
      const kind: MixKind = scenario === 'mixed' ? pick(mix) : scenario;
      await operation(work, kind, i);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return Math.min(next, count);
}

/** Slow clients, alternating slow uploads and slow downloads, until `until` fires; what they had going is given up. */
export async function runSlowClients(work: Workload, until: AbortSignal): Promise<void> {
  const { slowClients, slowRate, size } = work.options;
  const target: Target = { ...work.target, signal: AbortSignal.any([work.target.signal, until]) };
  const client = async (n: number) => {
    for (let round = 0; running(target); round++) {
      const file = randomFile(work.files);
      if ((n + round) % 2 === 1 && file) await downloadFile(target, file, undefined, 'slow download', slowRate);
      else {
        const uploaded = await plainUpload(target, size, 'slow upload', slowRate);
        if (uploaded) work.files.push(uploaded);
      }
    }
  };
  await Promise.all(Array.from({ length: slowClients }, (_, n) => client(n)));
}
