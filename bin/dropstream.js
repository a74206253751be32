#!/usr/bin/env node
// glibc's allocator settings for the server, unless the environment already
// has them: two malloc arenas instead of eight per core, and blocks from
// 64 KiB up (upload part buffers, and the 64 KiB socket reads, which at
// 128 KiB stayed in glibc's heap: 81-105 MiB of it after a soak, 28-37 at
// 64 KiB) mapped on their own, so they go back to the system when freed.
// glibc reads them only when a process starts, so `serve` replaces this
// process with itself once they are set (execve: the same pid, so signals,
// the exit code and the standard streams are the process's own, with no
// parent in between). Measured in docs/performance.md (Memory).
if (process.argv[2] === 'serve' && (process.env.MALLOC_ARENA_MAX === undefined || process.env.MALLOC_MMAP_THRESHOLD_ === undefined)) {
  const env = { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2', MALLOC_MMAP_THRESHOLD_: process.env.MALLOC_MMAP_THRESHOLD_ ?? '65536' };
  // process.execve: Node 22.15 and 23.11 on; without it the server runs with glibc's defaults.
  if (process.platform !== 'win32' && typeof process.execve === 'function') {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], env);
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
