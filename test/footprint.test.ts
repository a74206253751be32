// What the embedded default costs in memory, as the kernel counts it for the
// `dropstream serve` process (the compiled build, with the allocator settings
// its launcher sets). bench/embedded-footprint.ts measures the same in more
// detail; the README quotes its figures.
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const MiB = 1024 * 1024;

async function memory(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kB = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) * 1024;
  return { rss: kB('VmRSS'), peak: kB('VmHWM') };
}

describe('footprint of the embedded default (PGlite, local objects)', function () {
  this.timeout(90_000);
  let dataDir: string;
  let server: ServerProcess | undefined;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-footprint-'));
  });
  after(async () => {
    await server?.kill();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when it starts on an empty DATA_DIR (database created, migrations applied), then its peak RSS stays under 300 MiB and it idles under 200 MiB', async () => {
    server = await startServerProcess({
      DATA_DIR: dataDir,
      GC_INTERVAL: '0',
      MALLOC_ARENA_MAX: '2',
      MALLOC_MMAP_THRESHOLD_: '65536',
    });
    const pid = server.child.pid!;
    const started = await memory(pid);
    expect(started.peak / MiB, 'peak RSS (MiB) of a first start').to.be.below(300);
    // What the start left behind (PGlite's compile, the schema engine) is
    // garbage-collected by V8 within seconds of going idle, not at once.
    let idle = started;
    for (let waited = 0; waited < 60_000 && idle.rss >= 200 * MiB; waited += 500) {
      await sleep(500);
      idle = await memory(pid);
    }
    expect(idle.rss / MiB, 'idle RSS (MiB) after a first start').to.be.below(200);
    expect(idle.peak / MiB, 'peak RSS (MiB) while idle').to.be.below(300);
  });
});
