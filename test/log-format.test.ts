// How `dropstream serve` writes its log when LOG_FORMAT is unset: readable
// lines in a terminal, JSON lines into a pipe (issue 37, item 8).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { chooseLogFormat } from '../src/log-format.js';
import { envWithoutConfig, repoRoot } from './helpers/run-to-exit.js';

describe('log format', () => {
  it('when LOG_FORMAT is unset, then a terminal gets pretty lines and anything else JSON; when set, it wins', () => {
    expect(chooseLogFormat(undefined, true)).to.equal('pretty');
    expect(chooseLogFormat(undefined, false)).to.equal('json');
    expect(chooseLogFormat(undefined, undefined)).to.equal('json');
    expect(chooseLogFormat('json', true)).to.equal('json');
    expect(chooseLogFormat('pretty', false)).to.equal('pretty');
  });

  describe('`dropstream serve` (the compiled CLI: `npm run build` first)', () => {
    let dataDir: string;
    beforeEach(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'dropstream-log-format-'));
    });
    afterEach(async () => {
      await rm(dataDir, { recursive: true, force: true });
    });

    /**
     * What serve writes before it gives up on a database nobody listens on
     * (its retries are log lines; it exits within DATABASE_CONNECT_TIMEOUT),
     * with stdout a terminal (util-linux's `script` gives it a pty) or a pipe.
     */
    async function serveOutput(terminal: boolean, env: Record<string, string> = {}) {
      const node = process.execPath;
      const command = terminal ? ['script', ['-qec', `"${node}" bin/dropstream.js serve`, '/dev/null']] as const : [node, ['bin/dropstream.js', 'serve']] as const;
      const child = spawn(command[0], [...command[1]], {
        cwd: repoRoot,
        env: { ...envWithoutConfig(), DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', DATABASE_URL: 'postgresql://u@127.0.0.1:1/none', DATABASE_CONNECT_TIMEOUT: '1', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        err += chunk;
      });
      const deadline = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code] = await once(child, 'close');
      clearTimeout(deadline);
      expect(code, out).to.equal(1);
      const clean = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
      // Both streams in arrival order, and stderr alone: which of two pipes
      // is read first is the machine's choice (a loaded run got the last
      // JSON line of stdout after stderr's final line).
      return Object.assign(clean(out), { stderr: clean(err) });
    }
    const isJson = (line: string) => {
      try {
        return typeof JSON.parse(line) === 'object';
      } catch {
        return false;
      }
    };

    it('when stdout is a terminal and LOG_FORMAT is unset, then the lines are text a person reads, not JSON', async () => {
      const out = await serveOutput(true);
      expect(out).to.match(/^\[[0-9-]+ [0-9:.]+ [+-]\d{4}\] WARN: database not reachable, retrying$/m);
      expect(out.split('\n').filter(isJson)).to.deep.equal([]);
    });

    it('when stdout is a terminal and LOG_FORMAT=json, then JSON lines', async () => {
      const out = await serveOutput(true, { LOG_FORMAT: 'json' });
      expect(out.split('\n').filter(isJson).map((line) => JSON.parse(line).msg)).to.include('database not reachable, retrying');
    });

    it('when stdout is a pipe and LOG_FORMAT is unset, then every log line is JSON', async () => {
      const out = await serveOutput(false);
      const [log, last] = [out.split('\n').filter((l) => l && !l.startsWith('dropstream: ')), out.stderr.trim().split('\n').at(-1)];
      expect(log.length).to.be.at.least(1);
      for (const line of log) expect(isJson(line), line).to.equal(true);
      expect(last).to.match(/^dropstream: database at 127\.0\.0\.1:1\/none not reachable/);
    });
  });
});
