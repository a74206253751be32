// V8 compiles WebAssembly twice: at once with its baseline compiler
// (Liftoff), then again with TurboFan for the functions that run hot. For
// PGlite (PostgreSQL as an 8.7 MB module whose executor and main loop are a
// few huge functions) that second compile took about 450 MiB of compiler
// memory for a second or so after the first queries, every time the process
// started: a peak of 683 MiB against 141 MiB with Liftoff only, for PGlite
// alone. Queries ran at the same speed within the noise of this machine
// (2,000 inserts and 2,000 primary-key selects, both ways), and the process
// starts faster without the background compile. So the embedded default keeps
// WebAssembly on the baseline tier. The flags are process-wide and apply to
// modules compiled after this call (PGlite, Prisma's query compiler, the
// schema engine).
import { setFlagsFromString } from 'node:v8';

let applied = false;

export function keepWasmOnBaselineTier(): void {
  if (applied) return;
  applied = true;
  setFlagsFromString('--no-wasm-tier-up');
  setFlagsFromString('--no-wasm-dynamic-tiering');
}
