// collectWhenIdle (src/memory/idle-collect.ts): one collection once requests stop
// after a burst that grew V8's memory or glibc's heap; none while they go
// on, none after a burst that grew nothing, none after it is stopped.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import koffi from 'koffi';
import { collectWhenIdle } from '../../src/memory/idle-collect.js';
import { eventually } from '../helpers/raw-upload.js';

const MiB = 1024 * 1024;

/**
 * A collection now that also gives back V8's free pages, as src/memory/idle-collect.ts
 * runs it: a plain gc() left 134 of 327 MiB committed, which a burst then
 * reuses without any growth.
 */
function collectNow(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as (options: object) => void)({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
let kept: unknown[] = [];

/** A server whose requests leave garbage behind: `garbageMiB` of JS objects each. */
async function serverMaking(garbageMiB: number): Promise<{ server: Server; get(path?: string): Promise<void> }> {
  const server = createServer((req, res) => {
    // Objects on V8's heap (not buffers), dropped when the next request comes; a health probe makes none.
    if (!req.url!.startsWith('/healthz')) kept = Array.from({ length: garbageMiB * 16 }, () => new Array(8192).fill(Math.random()));
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, get: async (path = '/') => void (await (await fetch(`http://127.0.0.1:${port}${path}`)).text()) };
}

/** glibc's allocator, called directly: memory V8 never sees. */
const libc = (() => {
  const lib = koffi.load('libc.so.6');
  return {
    malloc: lib.func('void *malloc(size_t size)'),
    memset: lib.func('void *memset(void *s, int c, size_t n)'),
    free: lib.func('void free(void *ptr)'),
    trim: lib.func('int malloc_trim(size_t pad)'),
  };
})();

/** `mib` of 32 KiB blocks, each written to (so resident). */
const touchedBlocks = (mib: number): unknown[] => Array.from({ length: Math.ceil(mib * 32) }, () => libc.memset(libc.malloc(32 * 1024), 1, 32 * 1024));

/**
 * A server whose requests leave about `mib` of freed memory in glibc's main
 * heap, which V8 does not see (as the optimizing compiler's scratch memory
 * does): 32 KiB blocks written to, then seven in eight freed. The kept ones
 * (the last among them) stop glibc from giving the rest back by lowering
 * the heap's top, as free() alone would.
 */
async function serverLeavingGlibcHeap(mib: number): Promise<{ server: Server; get(): Promise<void> }> {
  const kept: unknown[] = [];
  const server = createServer((_req, res) => {
    const blocks = touchedBlocks((mib * 8) / 7);
    blocks.forEach((block, i) => (i % 8 === 7 || i === blocks.length - 1 ? kept.push(block) : libc.free(block)));
    res.end('ok');
  });
  server.once('close', () => kept.splice(0).forEach((block) => libc.free(block)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, get: async () => void (await (await fetch(`http://127.0.0.1:${port}/`)).text()) };
}

describe('collectWhenIdle', () => {
  const stops: (() => void)[] = [];
  const servers: Server[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) stop();
    for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
    kept = [];
  });

  it('when requests that grew the heap stop, then one collection runs after the quiet period and gives memory back', async () => {
    const { server, get } = await serverMaking(16);
    servers.push(server);
    const reports: { freed_mib: number; took_ms: number }[] = [];
    // The baseline is taken from a collected heap: pages other files left
    // committed in this worker would take the burst without any growth.
    collectNow();
    stops.push(collectWhenIdle([server], { quietMs: 150, minGrowthBytes: 8 * MiB, onCollect: (r) => reports.push(r) }));
    for (let i = 0; i < 6; i++) await get();
    kept = [];
    // Two quiet periods, with room for a loaded machine's late timers.
    await eventually(async () => reports.length, (n) => n > 0, 3000);
    await sleep(300);
    expect(reports).to.have.length(1);
    expect(reports[0]!.freed_mib).to.be.greaterThan(8);
    // A full collection of a heap that held 16 MiB, timed: a report that
    // never timed it (0) or timed something else entirely fails here.
    expect(reports[0]!.took_ms).to.be.within(1, 10_000);
  });

  it('when requests grew only glibc\'s heap (freed memory V8 does not see), then the collection still runs and gives it back to the system', async () => {
    const { server, get } = await serverLeavingGlibcHeap(32);
    servers.push(server);
    const reports: { freed_mib: number; rss_freed_mib: number }[] = [];
    collectNow();
    stops.push(collectWhenIdle([server], { quietMs: 150, minGrowthBytes: 16 * MiB, onCollect: (r) => reports.push(r) }));
    const rss = process.memoryUsage.rss();
    await get();
    // What it freed stayed resident (else there is nothing to test).
    expect(process.memoryUsage.rss() - rss).to.be.greaterThan(32 * MiB);
    await eventually(async () => reports.length, (n) => n > 0, 3000);
    expect(reports).to.have.length(1);
    // The kept blocks (4.6 MiB) stay.
    expect(reports[0]!.rss_freed_mib).to.be.greaterThan(24);
    expect(process.memoryUsage.rss() - rss).to.be.lessThan(12 * MiB);
  });

  it('when memory went back by itself after the collector started, then growth counts from there', async () => {
    // 24 MiB in use when the collector starts (as a start's own garbage is), given back a moment later.
    const startup = touchedBlocks(24);
    const { server, get } = await serverLeavingGlibcHeap(20);
    servers.push(server);
    const reports: { rss_freed_mib: number }[] = [];
    collectNow();
    stops.push(collectWhenIdle([server], { quietMs: 150, minGrowthBytes: 16 * MiB, onCollect: (r) => reports.push(r) }));
    const started = process.memoryUsage.rss();
    startup.forEach((block) => libc.free(block));
    libc.trim(0);
    expect(started - process.memoryUsage.rss()).to.be.greaterThan(16 * MiB);
    await sleep(500);
    // 20 MiB above where it rested, less than 16 above where it started.
    await get();
    expect(process.memoryUsage.rss()).to.be.lessThan(started + 16 * MiB);
    await eventually(async () => reports.length, (n) => n > 0, 3000);
    expect(reports).to.have.length(1);
    expect(reports[0]!.rss_freed_mib).to.be.greaterThan(12);
  });

  it('when it settles the start, then it collects once at the first quiet period without any growth, and not again', async () => {
    const { server } = await serverMaking(0);
    servers.push(server);
    let collections = 0;
    stops.push(collectWhenIdle([server], { quietMs: 100, minGrowthBytes: 64 * MiB, settleStart: true, onCollect: () => collections++ }));
    await eventually(async () => collections, (n) => n > 0, 3000);
    expect(collections).to.equal(1);
    await sleep(500);
    expect(collections).to.equal(1);
  });

  it('when requests keep coming, then nothing is collected until they stop', async () => {
    const { server, get } = await serverMaking(16);
    servers.push(server);
    let collections = 0;
    collectNow();
    // A quiet period well above a request's time on a loaded machine (a
    // 200 ms one saw a gap that long between two requests at load 10).
    stops.push(collectWhenIdle([server], { quietMs: 500, minGrowthBytes: 8 * MiB, onCollect: () => collections++ }));
    const until = Date.now() + 1500;
    while (Date.now() < until) {
      await get();
      await sleep(40);
    }
    expect(collections).to.equal(0);
    await eventually(async () => collections, (n) => n > 0, 3000);
    expect(collections).to.equal(1);
  });

  it('when a quiet server gets a request now and then (a health check), then nothing is collected', async () => {
    const { server, get } = await serverMaking(0);
    servers.push(server);
    let collections = 0;
    stops.push(collectWhenIdle([server], { quietMs: 100, minGrowthBytes: 64 * MiB, onCollect: () => collections++ }));
    for (let i = 0; i < 4; i++) {
      await get();
      await sleep(150);
    }
    expect(collections).to.equal(0);
  });

  it('when health probes come more often than the quiet period after a burst, then they do not count and the collection still runs', async () => {
    const { server, get } = await serverMaking(16);
    servers.push(server);
    let collections = 0;
    collectNow();
    stops.push(collectWhenIdle([server], { quietMs: 200, minGrowthBytes: 8 * MiB, ignorePaths: ['/healthz'], onCollect: () => collections++ }));
    for (let i = 0; i < 6; i++) await get();
    kept = [];
    // A probe every 50 ms or so (eventually's pace), four in each quiet period, until it collects.
    const probing = async () => {
      await get('/healthz?probe=1');
      return collections;
    };
    expect(await eventually(probing, (n) => n > 0, 3000)).to.equal(1);
  });

  it('when it is stopped, then it neither collects nor listens for requests any more', async () => {
    const { server, get } = await serverMaking(16);
    servers.push(server);
    let collections = 0;
    const before = server.listenerCount('request');
    const stop = collectWhenIdle([server], { quietMs: 100, minGrowthBytes: 8 * MiB, onCollect: () => collections++ });
    expect(server.listenerCount('request')).to.equal(before + 1);
    stop();
    expect(server.listenerCount('request')).to.equal(before);
    // The growth comes after the stop: on a loaded machine, requests before
    // it could take longer than a quiet period and be collected while it ran.
    collectNow();
    for (let i = 0; i < 4; i++) await get();
    kept = [];
    await sleep(400);
    expect(collections).to.equal(0);
  });
});
