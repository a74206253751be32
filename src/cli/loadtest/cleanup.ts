// After the measured window: delete what the run uploaded. Its requests have
// a recorder of their own, so they are neither counted nor drawn as load
// (issue 39: 200 cleanup DELETEs were a 120 req/s spike in the last second
// of the chart). On a throttled account it does not give up after a few
// refusals: it waits out each Retry-After until everything is gone, up to
// CLEANUP_LIMIT_MS (or Ctrl-C), and names what it could not delete.
import { apiUrl } from '../transfer-http.js';
import { Recorder } from './recorder.js';
import { parsed, send, type Target } from './requests.js';
import { uploadedFile } from './resumable.js';
import type { Workload } from './scenarios.js';
import type { Cleanup } from './summary.js';
import { isThrottled } from './throttle.js';

/** The longest the cleanup waits out refusals: a per-minute limit's window many times over. */
export const CLEANUP_LIMIT_MS = 10 * 60_000;
/** Failures other than throttling (no answer, 5xx) a file may meet before it is reported left behind. */
const FAILURES_PER_FILE = 3;

export async function removeFiles(work: Workload, signal: AbortSignal, say: (line: string) => void): Promise<Cleanup> {
  const recorder = new Recorder();
  const { gate } = work.target;
  const target: Target = { ...work.target, recorder, signal, deadline: Date.now() + CLEANUP_LIMIT_MS };
  const waitedBefore = gate.waitedMs;
  let deleted = 0;
  let announced = 0;
  const announce = (what: string) => {
    const wait = gate.heldUntil - Date.now();
    if (wait > 2000 && gate.heldUntil !== announced) {
      announced = gate.heldUntil;
      say(`cleanup: waiting ${Math.ceil(wait / 1000)} s (Retry-After) to ${what}`);
    }
  };
  // Finished tus uploads whose file the throttled run never learnt: asked now, deleted below.
  for (const path of work.tus.finished.splice(0)) {
    announce('ask which file a finished tus upload became');
    const file = await uploadedFile(target, path, work.options.size);
    if (file) work.files.push(file);
  }
  // Begun and refused: terminated, so no incomplete upload waits for its expiry on the account.
  for (const path of work.tus.unfinished.splice(0)) {
    announce('terminate an unfinished tus upload');
    await send(target, { kind: 'tus DELETE', method: 'DELETE', url: apiUrl(target.server, path), headers: { 'Tus-Resumable': '1.0.0' } });
  }
  // Begun straight to the store and not finished: aborted, giving back their slots and reservations.
  for (const path of work.direct.splice(0)) {
    announce('abort an unfinished direct upload');
    await send(target, { kind: 'direct DELETE', method: 'DELETE', url: apiUrl(target.server, path) });
  }
  const queue = work.files.map((file) => ({ id: file.id, failures: 0 }));
  const left: number[] = [];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let file = queue.shift(); file; file = queue.shift()) {
        announce(`delete ${queue.length + 1} more files`);
        const answer = await send(target, { kind: 'delete', method: 'DELETE', url: apiUrl(target.server, `/api/v1/files/${file.id}`) });
        if (answer.status === 200 || answer.status === 404) deleted += 1;
        else if (!signal.aborted && !answer.notSent && (isThrottled(answer.status) || ++file.failures < FAILURES_PER_FILE)) queue.push(file);
        else left.push(file.id);
      }
    }),
  );
  // On --setup's own account, whatever is left is the run's too (an upload the server
  // finished after the run gave up on it): found by listing, so the account can go.
  let strays = 0;
  for (let round = 0; work.options.setup && !signal.aborted && round < 20; round++) {
    announce('list the account for files the run never learnt of');
    const ids = (parsed(await send(target, { kind: 'list', method: 'GET', url: apiUrl(target.server, '/api/v1/files?limit=100') }))?.files ?? [])
      .map((f: { file_id: number }) => f.file_id)
      .filter((id: number) => !left.includes(id));
    if (!ids.length) break;
    for (const id of ids) {
      const answer = await send(target, { kind: 'delete', method: 'DELETE', url: apiUrl(target.server, `/api/v1/files/${id}`) });
      if (answer.status === 200 || answer.status === 404) strays += 1;
      else left.push(id);
    }
  }
  return {
    deleted,
    strays,
    failed: left.length,
    left: left.sort((a, b) => a - b),
    statuses: recorder.totals().delete?.statuses ?? {},
    tus: { asked: recorder.totals()['tus GET']?.requests ?? 0, terminated: recorder.totals()['tus DELETE']?.statuses['204'] ?? 0 },
    direct: { aborted: recorder.totals()['direct DELETE']?.statuses['200'] ?? 0 },
    waitedSeconds: (gate.waitedMs - waitedBefore) / 1000,
  };
}
