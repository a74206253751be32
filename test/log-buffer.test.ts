// The log's buffer is capped (src/server.ts, LOG_BUFFER_BYTES): when stdout
// stops draining (a log collector that hangs), lines past the cap are
// dropped and counted instead of growing the process's memory.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { constants } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createLogger, logDestination } from '../src/server.js';
import { startTestServer } from './helpers/server.js';

describe('log buffer', () => {
  let dir: string;
  let fd: number;
  let destination: ReturnType<typeof logDestination> | undefined;
  beforeEach(() => {
    // A pipe nobody reads: opened read-write so the open does not wait for a reader.
    dir = mkdtempSync(join(tmpdir(), 'dropstream-log-'));
    execFileSync('mkfifo', [join(dir, 'stdout')]);
    fd = openSync(join(dir, 'stdout'), constants.O_RDWR | constants.O_NONBLOCK);
  });
  afterEach(async () => {
    // Read the pipe until the destination has written everything, then end
    // it: a destination left with bytes to write would hold up the exit
    // (pino flushes at exit, retrying for ever).
    const chunk = Buffer.alloc(65536);
    const drain = () => {
      try {
        while (readSync(fd, chunk) > 0);
      } catch {}
    };
    for (let i = 0; destination && i < 200; i++) {
      drain();
      if ((destination as unknown as { _len: number })._len === 0 && !(destination as unknown as { _writing: boolean })._writing) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (destination) {
      const ended = new Promise((resolve) => destination!.once('close', resolve));
      destination.end();
      drain();
      await ended;
    } else closeSync(fd);
    destination = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('when stdout stops draining, then the buffer stays under its cap and the rest is dropped', () => {
    destination = logDestination(fd, 256 * 1024);
    let dropped = 0;
    destination.on('drop', (data: string) => void (dropped += Buffer.byteLength(data)));
    const logger = createLogger('info', 'json', destination);
    const line = 'x'.repeat(200);
    for (let i = 0; i < 20_000; i++) logger.info({ i, line }, 'request');
    // ~5 MB logged into a pipe that takes 64 KiB: all but the pipe and the cap was dropped.
    expect(dropped).to.be.greaterThan(4_000_000);
    expect((destination as unknown as { _len: number })._len).to.be.at.most(256 * 1024);
  });

  it('when the destination drops bytes, then /metrics counts them', async () => {
    destination = logDestination(fd, 64 * 1024);
    const logger = createLogger('info', 'json', destination);
    const t = await startTestServer('pglite', {}, logger);
    try {
      // 1 MB of lines into a pipe of 64 KiB and a cap of 64 KiB.
      const line = 'y'.repeat(500);
      for (let i = 0; i < 2_000; i++) logger.info({ line }, 'filler');
      const text = await (await fetch(`${t.server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${t.server.adminToken}` } })).text();
      const value = Number(/^dropstream_log_dropped_bytes_total (\d+)/m.exec(text)?.[1]);
      expect(value).to.be.greaterThan(500_000);
    } finally {
      // close() waits for the log to be written for 2 s at most, then ends.
      const started = Date.now();
      await t.close();
      expect(Date.now() - started).to.be.below(10_000);
    }
  });
});
