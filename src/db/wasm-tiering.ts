// V8 compiles WebAssembly twice: at once with its baseline compiler
// (Liftoff), then again with TurboFan for the functions that run hot. For
// PGlite (PostgreSQL as an 8.7 MB module whose executor and main loop are a
// few huge functions) that second compile took about 450 MiB of compiler
// memory for a second or so after the first queries, every time the process
// started: a peak of 683 MiB against 141 MiB with Liftoff only, for PGlite
// alone, and 823 against 228 MiB for a first start of the server. So the
// embedded default keeps WebAssembly on the baseline tier. The flags are
// process-wide and apply to modules compiled after this call (PGlite,
// Prisma's query compiler, the schema engine). The cost, measured as server
// CPU time per request after warm-up: the same for GET /api/v1/files/{id}
// (2.1-2.3 ms both ways), up to 10% more for GET /api/v1/files (2.5-2.7 vs
// 2.2-2.5 ms). Switching the flags back on once PGlite had compiled saved
// that 10% but put the first start's peak at 286-290 MiB (something compiled
// after that tiers up; we did not pin down what), too close to the 300 MiB
// target.
import { setFlagsFromString } from 'node:v8';

let applied = false;

export function keepWasmOnBaselineTier(): void {
  if (applied) return;
  applied = true;
  setFlagsFromString('--no-wasm-tier-up');
  setFlagsFromString('--no-wasm-dynamic-tiering');
}
