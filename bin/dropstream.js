#!/usr/bin/env node
// How `serve` runs, set here so that operators do not have to (issue 24;
// measured in docs/performance.md, Memory). Each is kept when the operator
// set it already (in the environment, NODE_OPTIONS or node's own flags).
//
// glibc's allocator: two malloc arenas instead of eight per core, and blocks
// from 64 KiB up (upload part buffers, and the 64 KiB socket reads, which at
// 128 KiB stayed in glibc's heap) mapped on their own, so they go back to
// the system when freed.
//
// V8's heap: Node 24 lets the young generation grow to 2 x 64 MiB, and the
// old generation to up to 4x what was live after the last full collection
// before it collects again, which under metadata load was most of the peak
// for no more requests per second; semi-spaces of 32 MiB and growth of 1.5x
// keep it to what the load needs.
//
// glibc reads its settings, and V8 its heap sizes, only when a process
// starts, so `serve` replaces this process with itself once they are set
// (execve: the same pid, so signals, the exit code and the standard streams
// are the process's own, with no parent in between).
const V8_FLAGS = ['--max-semi-space-size=32', '--heap-growing-percent=50'];

function servePlan() {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  const has = (flag) => given.some((arg) => arg.replaceAll('_', '-').startsWith(flag.split('=')[0]));
  const flags = V8_FLAGS.filter((flag) => !has(flag));
  const env = { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2', MALLOC_MMAP_THRESHOLD_: process.env.MALLOC_MMAP_THRESHOLD_ ?? '65536' };
  const needed = flags.length > 0 || process.env.MALLOC_ARENA_MAX === undefined || process.env.MALLOC_MMAP_THRESHOLD_ === undefined;
  return { needed, flags, env };
}

if (process.argv[2] === 'serve') {
  const plan = servePlan();
  // process.execve: Node 22.15 and 23.11 on; without it the server runs with the defaults.
  if (plan.needed && process.platform !== 'win32' && typeof process.execve === 'function') {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...plan.flags, ...process.argv.slice(1)], plan.env);
  }
}

// The compiled CLI lives in dist/, built by `npm ci` (postinstall) or `npm run build`.
import('../dist/cli/index.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist')) {
    process.stderr.write('dropstream: not built yet; run `npm run build`\n');
    process.exit(1);
  }
  throw err;
});
