// SIGTERM under keep-alive clients polling back to back (issue 51): six
// requests sent in the signal's first milliseconds were read, served and
// then reset, logged 499, while the `stopped` line said nothing was cut.
// `dropstream serve` as a process of its own (the compiled CLI: `npm run
// build` first); test/listener.test.ts runs the same race 20 times on a
// listener alone.
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startPollers, unanswered, type Poll } from '../helpers/keep-alive-pollers.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

describe('SIGTERM under keep-alive pollers (dropstream serve, no Docker)', function () {
  this.timeout(60_000);
  let dataDir: string;
  let server: ServerProcess | undefined;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-keep-alive-'));
  });
  after(async () => {
    await server?.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when SIGTERM comes while 6 keep-alive clients poll, then every request gets an answer (the last with Connection: close), none is reset, and the log and the stopped line say so', async () => {
    // SHUTDOWN_IDLE_WAIT: the default (the test helper's is 0).
    server = await startServerProcess({ DATA_DIR: dataDir, SHUTDOWN_IDLE_WAIT: '5', LOG_LEVEL: 'debug' });
    const pollers = startPollers(`${server.url}/healthz`);
    try {
      await pollers.warmedUp();
      const exited = once(server.child, 'exit');
      server.child.kill('SIGTERM');
      await pollers.done;
      const [code] = await exited;
      expect(unanswered(pollers.polls)).to.deep.equal([]);
      expect(code).to.equal(0);
    } finally {
      pollers.stop();
    }
    await server.kill();
    const lines = server.stdoutLines.flatMap((line) => {
      try {
        return [JSON.parse(line)];
      } catch {
        return [];
      }
    });
    const answers = pollers.polls.flat().filter((p): p is Extract<Poll, { status: number }> => 'status' in p);
    const logged = lines.filter((line) => line.route === '/healthz');
    expect(logged.filter((line) => line.status !== 200), 'requests logged other than 200').to.deep.equal([]);
    expect(logged.length, 'requests logged, as answered').to.equal(answers.length);
    expect(lines.find((line) => line.msg === 'stopped')).to.include({ cut_connections: 0, still_delivering: 0, closed_idle: 0, reset_requests: 0 });
  });
});
