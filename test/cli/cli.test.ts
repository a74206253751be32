// The `dropstream` command as an operator runs it: the compiled CLI
// (bin/dropstream.js -> dist/, so `npm run build` first) in a child process.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { call } from '../helpers/client.js';
import { backends, createTestDatabase } from '../helpers/databases.js';
import { freePort } from '../helpers/ports.js';
import { envWithoutConfig, runToExit } from '../helpers/run-to-exit.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = join(root, 'bin', 'dropstream.js');

/** This process's environment without anything dropstream reads (glibc's MALLOC_* too), so only what a test passes reaches the child. */
const baseEnv = envWithoutConfig((name) => name === 'ADMIN_URL' || name.startsWith('MALLOC_'));

/** The node flags a running process was started, or re-executed, with (/proc/<pid>/cmdline, up to the script). */
async function nodeFlags(pid: number): Promise<string[]> {
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').slice(1);
  return args.slice(0, args.findIndex((arg) => arg.endsWith('dropstream.js')));
}

/** The MALLOC_* variables a running process has (/proc/<pid>/environ: what it was started, or re-executed, with). */
async function mallocEnv(pid: number): Promise<Record<string, string>> {
  const entries = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0').filter((entry) => entry.startsWith('MALLOC_'));
  return Object.fromEntries(entries.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
}

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Non-empty stdout lines. */
  lines: string[];
}

/** Runs `dropstream ...args` to completion; rejects when it outlives `timeoutMs`. */
async function runCli(args: string[], env: Record<string, string>, timeoutMs = 15_000): Promise<CliResult> {
  const { code, signal, stdout, stderr } = await runToExit([bin, ...args], { cwd: root, env: { ...baseEnv, ...env }, deadlineMs: timeoutMs });
  if (signal === 'SIGKILL') throw new Error(`dropstream ${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`);
  return { code, stdout, stderr, lines: stdout.split('\n').filter((line) => line !== '') };
}

/** The one JSON line a successful command prints, after checking it succeeded quietly. */
function jsonLine(result: CliResult): any {
  expect(result.stderr, 'stderr').to.equal('');
  expect(result.code, 'exit code').to.equal(0);
  expect(result.lines, 'stdout lines').to.have.length(1);
  return JSON.parse(result.lines[0]!);
}

/** Checks a failure: non-zero exit, nothing on stdout, one `dropstream: ...` line on stderr; returns that line. */
function failure(result: CliResult): string {
  expect(result.code, 'exit code').to.be.a('number').and.not.equal(0);
  expect(result.stdout, 'stdout').to.equal('');
  expect(result.stderr, 'stderr').to.match(/^dropstream: [^\n]+\n$/);
  return result.stderr.trim();
}

/** Checks a usage mistake: exit 2, nothing on stdout, a `dropstream: ...` line then the command's usage; returns the first line. */
function usageFailure(result: CliResult, usage: string): string {
  expect(result.code, 'exit code').to.equal(2);
  expect(result.stdout, 'stdout').to.equal('');
  const [first, ...rest] = result.stderr.trimEnd().split('\n');
  expect(first).to.match(/^dropstream: /);
  expect(rest.join('\n')).to.include(usage);
  return first!;
}

const packageVersion = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')).version as string;

describe('dropstream CLI: admin commands', () => {
  let server: TestServer;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, env);

  before(async () => {
    server = await startTestServer('pglite');
    env = { ADMIN_URL: server.server.adminUrl, ADMIN_TOKEN: server.server.adminToken };
  });

  after(() => server?.close());

  const stats = (key: string) => call(server.url('/api/v1/stats'), { key });

  describe('accounts and keys', () => {
    it('when accounts create succeeds, then it prints one JSON line with a working API key', async () => {
      const out = jsonLine(await cli('accounts', 'create', '--plan', 'pro', '--email', 'x@example.com'));
      expect(Object.keys(out)).to.deep.equal(['account_id', 'plan', 'api_key']);
      expect(out.account_id).to.be.a('number').and.above(0);
      expect(out.plan).to.equal('pro');
      expect(out.api_key).to.match(/^ds_live_\S+$/);
      const res = await stats(out.api_key);
      expect(res.status).to.equal(200);
      expect(res.body.plan).to.equal('pro');
    });

    it('when keys rotate succeeds, then the old key is refused and the new one works', async () => {
      const { accountId, apiKey: oldKey } = await server.account('pro');
      const out = jsonLine(await cli('keys', 'rotate', '--account', String(accountId)));
      expect(Object.keys(out)).to.deep.equal(['account_id', 'api_key']);
      expect(out.account_id).to.equal(accountId);
      expect(out.api_key).to.match(/^ds_live_\S+$/).and.not.equal(oldKey);
      expect((await stats(oldKey)).status).to.equal(401);
      expect((await stats(out.api_key)).status).to.equal(200);
    });

    it('when accounts set-plan succeeds, then the API reports the new plan', async () => {
      const { accountId, apiKey } = await server.account('pro');
      const out = jsonLine(await cli('accounts', 'set-plan', '--account', String(accountId), '--plan', 'business'));
      expect(out).to.deep.equal({ account_id: accountId, plan: 'business' });
      const res = await stats(apiKey);
      expect(res.status).to.equal(200);
      expect(res.body.plan).to.equal('business');
    });
  });

  describe('accounts list', () => {
    it('when accounts exist, then accounts list prints them oldest first with plan, email and what they store, paginated', async () => {
      const a = jsonLine(await cli('accounts', 'create', '--plan', 'pro', '--email', 'list-a@example.com'));
      const b = jsonLine(await cli('accounts', 'create', '--plan', 'business'));
      const all = jsonLine(await cli('accounts', 'list', '--limit', '100'));
      expect(Object.keys(all)).to.deep.equal(['accounts', 'pagination']);
      const ids = all.accounts.map((row: { account_id: number }) => row.account_id);
      expect(ids).to.deep.equal([...ids].sort((x: number, y: number) => x - y));
      const rowA = all.accounts.find((row: { account_id: number }) => row.account_id === a.account_id);
      expect(rowA).to.include({ email: 'list-a@example.com', plan: 'pro', total_files: 0, total_size: 0 });
      expect(rowA.created_at).to.match(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
      expect(all.accounts.find((row: { account_id: number }) => row.account_id === b.account_id)).to.include({ email: null, plan: 'business' });
      expect(all.pagination).to.deep.include({ page: 1, limit: 100, total: all.accounts.length });
      const page = jsonLine(await cli('accounts', 'list', '--limit', '1', '--page', '2'));
      expect(page.accounts.map((row: { account_id: number }) => row.account_id)).to.deep.equal([ids[1]]);
      expect(page.pagination).to.deep.equal({ page: 2, limit: 1, total: all.pagination.total, pages: all.pagination.total });
    });

    it('when an account has files, then accounts list counts them', async () => {
      const { accountId, apiKey } = await server.account('pro');
      const form = new FormData();
      form.append('file', new Blob(['twelve bytes']), 'a.txt');
      expect((await fetch(server.url('/api/v1/files/upload'), { method: 'POST', headers: { Authorization: `Bearer ${apiKey}` }, body: form })).status).to.equal(201);
      const all = jsonLine(await cli('accounts', 'list', '--limit', '100'));
      expect(all.accounts.find((row: { account_id: number }) => row.account_id === accountId)).to.include({ total_files: 1, total_size: 12 });
    });

    it('when the limit is over 100, then the admin API answers 400 invalid_parameter and the CLI prints it', async () => {
      expect(failure(await cli('accounts', 'list', '--limit', '101'))).to.equal('dropstream: 400 invalid_parameter: limit must be an integer from 1 to 100');
    });
  });

  describe('help and version', () => {
    it('when a command is given --help, then its usage and what it does go to stdout, exit 0, and nothing runs', async () => {
      for (const [args, usage] of [
        [['accounts', 'create', '--help'], 'usage: dropstream accounts create --plan <name> [--email <email>]'],
        [['plans', 'set', '-h'], 'usage: dropstream plans set <name> [--api-access true|false]'],
        [['gc', '--help'], 'usage: dropstream gc [--grace SECONDS]'],
        [['serve', '--help'], 'usage: dropstream serve [--port N] [--host ADDRESS]'],
        [['upload', '--help'], 'usage: dropstream upload <path>'],
        [['links', 'create', '--help'], 'usage: dropstream links create <file-id>'],
      ] as const) {
        // ADMIN_URL points nowhere: a command that ran would fail.
        const result = await runCli([...args], { ADMIN_URL: 'http://127.0.0.1:1', ADMIN_TOKEN: 'x' });
        expect(result.code, args.join(' ')).to.equal(0);
        expect(result.stderr, args.join(' ')).to.equal('');
        expect(result.stdout.startsWith(usage), `${args.join(' ')}: ${result.stdout}`).to.equal(true);
      }
    });

    it("when loadtest is given --help or a typo'd flag, then it answers as the other commands do", async () => {
      const help = await cli('loadtest', '--help');
      expect(help.code).to.equal(0);
      expect(help.stdout.startsWith('usage: dropstream loadtest <uploads|resumable|direct|downloads|metadata|slow|mixed>')).to.equal(true);
      expect(usageFailure(await cli('loadtest', 'uploads', '--concurency', '4'), 'usage: dropstream loadtest')).to.equal('dropstream: unknown option --concurency for `loadtest`; did you mean --concurrency?');
    });

    it('when a group is given --help, then its commands are listed', async () => {
      const result = await cli('links', '--help');
      expect(result.code).to.equal(0);
      expect(result.stdout).to.include('dropstream links list <file-id>').and.include('dropstream links create <file-id>').and.include('dropstream links revoke <file-id> <link-id>');
    });

    it("when --version is asked, then it prints package.json's version and the commit dist/ was built from", async () => {
      const built = await readFile(join(root, 'dist', 'build-info.json'), 'utf8').then((text) => JSON.parse(text).commit as string, () => 'unknown');
      expect((await cli('--version')).stdout).to.equal(`dropstream ${packageVersion} (commit ${built})\n`);
    });
  });

  describe('plans', () => {
    it('when sizes and times are given with units, then plans set stores them in bytes and seconds', async () => {
      const out = jsonLine(await cli('plans', 'set', 'units', '--max-file-size', '1.5GiB', '--max-total-size', '10GiB', '--max-expires-in', '7d'));
      expect(out).to.include({ max_file_size: 1.5 * 2 ** 30, max_total_size: 10 * 2 ** 30, max_expires_in: 7 * 86_400 });
      const small = jsonLine(await cli('plans', 'set', 'units', '--max-file-size', '64KiB', '--max-total-size', '100MiB', '--max-expires-in', '90m'));
      expect(small).to.include({ max_file_size: 65_536, max_total_size: 100 * 2 ** 20, max_expires_in: 5400 });
      expect(failure(await cli('plans', 'set', 'units', '--max-total-size', '10XB'))).to.equal('dropstream: --max-total-size must be a size such as 1048576, 64KiB or 10GiB, not "10XB"');
    });

    it('when plans set creates a plan, then it prints the plan and plans list includes it', async () => {
      const out = jsonLine(
        await cli(
          'plans', 'set', 'tiny', '--api-access', 'true', '--requests-per-minute', '5', '--requests-per-day', '10', '--max-file-size', '1000', '--daily-uploads', '2',
          '--concurrent-uploads', '3', '--max-total-size', '5000', '--max-expires-in', '86400',
        ),
      );
      expect(out).to.deep.equal({
        name: 'tiny', api_access: true, requests_per_minute: 5, requests_per_day: 10, max_file_size: 1000, daily_uploads: 2, concurrent_uploads: 3, max_total_size: 5000, max_expires_in: 86400,
      });

      const list = jsonLine(await cli('plans', 'list'));
      expect(list).to.be.an('array');
      expect(list.map((p: { name: string }) => p.name)).to.include.members(['free', 'pro', 'business', 'tiny']);
      expect(list.find((p: { name: string }) => p.name === 'tiny')).to.deep.equal(out);
    });

    it('when plans set changes one field of an existing plan, then the other fields are kept', async () => {
      jsonLine(await cli('plans', 'set', 'partial', '--api-access', 'true', '--requests-per-minute', '7', '--requests-per-day', '70', '--max-file-size', '700', '--daily-uploads', '3'));
      const out = jsonLine(await cli('plans', 'set', 'partial', '--daily-uploads', '4'));
      expect(out).to.deep.equal({ name: 'partial', api_access: true, requests_per_minute: 7, requests_per_day: 70, max_file_size: 700, daily_uploads: 4, concurrent_uploads: null, max_total_size: null, max_expires_in: null });
      // `none` lifts a cap that was set.
      jsonLine(await cli('plans', 'set', 'partial', '--concurrent-uploads', '2', '--max-total-size', '9000', '--max-expires-in', '60'));
      const lifted = jsonLine(await cli('plans', 'set', 'partial', '--concurrent-uploads', 'none', '--max-total-size', 'none', '--max-expires-in', 'none'));
      expect([lifted.concurrent_uploads, lifted.max_total_size, lifted.max_expires_in]).to.deep.equal([null, null, null]);
      const list = jsonLine(await cli('plans', 'list'));
      expect(list.find((p: { name: string }) => p.name === 'partial')).to.deep.equal(out);
    });

    it('when the objects are on the local disk, then a plan over S3\'s 5 TiB is accepted (the ceiling is the store\'s)', async () => {
      const out = jsonLine(await cli('plans', 'set', 'vast', '--max-file-size', String(6 * 2 ** 40)));
      expect(out.max_file_size).to.equal(6 * 2 ** 40);
    });

    it('when plans set is given a new plan with one field, then the rest start switched off', async () => {
      const out = jsonLine(await cli('plans', 'set', 'sparse', '--max-file-size', '123'));
      expect(out).to.deep.equal({ name: 'sparse', api_access: false, requests_per_minute: 0, requests_per_day: 0, max_file_size: 123, daily_uploads: 0, concurrent_uploads: null, max_total_size: null, max_expires_in: null });
    });
  });

  describe('failures', () => {
    it('when the plan does not exist, then accounts create fails with one line naming it', async () => {
      expect(failure(await cli('accounts', 'create', '--plan', 'nosuch'))).to.include('nosuch');
    });

    it('when the account does not exist, then keys rotate fails with one line', async () => {
      expect(failure(await cli('keys', 'rotate', '--account', '999999'))).to.match(/no such account/i);
    });

    it('when the account does not exist, then accounts set-plan fails with one line', async () => {
      expect(failure(await cli('accounts', 'set-plan', '--account', '999999', '--plan', 'pro'))).to.match(/no such account/i);
    });

    it('when a flag value is not a number, then the CLI names the flag', async () => {
      expect(failure(await cli('plans', 'set', 'tiny', '--max-file-size', 'abc'))).to.include('--max-file-size');
      // Nothing was changed on the way.
      const list = jsonLine(await cli('plans', 'list'));
      expect(list.map((p: { name: string }) => p.name)).not.to.include('abc');
    });

    it('when a boolean flag is not true or false, then the CLI names the flag', async () => {
      expect(failure(await cli('plans', 'set', 'tiny', '--api-access', 'yes'))).to.include('--api-access');
    });

    it('when a required flag is missing, then the CLI names it', async () => {
      expect(failure(await cli('accounts', 'create'))).to.include('--plan');
    });

    it('when a flag is unknown, then the CLI names it and the command, and shows its usage (exit 2)', async () => {
      expect(usageFailure(await cli('plans', 'list', '--bogus'), 'usage: dropstream plans list')).to.equal('dropstream: unknown option --bogus for `plans list`');
    });

    it("when a flag is typo'd, then the CLI says which one was meant, with the command's usage, and changes nothing", async () => {
      const before = jsonLine(await cli('accounts', 'list', '--limit', '100')).pagination.total;
      const line = usageFailure(await cli('accounts', 'create', '--plan', 'pro', '--emial', 'typo@example.com'), 'usage: dropstream accounts create --plan <name> [--email <email>]');
      expect(line).to.equal('dropstream: unknown option --emial for `accounts create`; did you mean --email?');
      expect(jsonLine(await cli('accounts', 'list', '--limit', '100')).pagination.total).to.equal(before);
      // Not node's parser text.
      expect((await cli('accounts', 'create', '--emial', 'x')).stderr).not.to.include('To specify a positional argument');
    });

    it('when a flag has no value, then the CLI says so for that command', async () => {
      expect(usageFailure(await cli('accounts', 'create', '--plan'), 'usage: dropstream accounts create')).to.equal('dropstream: --plan needs a value for `accounts create`');
    });

    it('when the command is unknown, then the CLI says so, and suggests the one meant', async () => {
      const [top, typo, sub, bare] = await Promise.all([cli('frobnicate'), cli('acounts', 'list'), cli('accounts', 'frobnicate'), cli('accounts')]);
      expect(failure(top)).to.equal('dropstream: unknown command: frobnicate (see `dropstream help`)');
      expect(failure(typo)).to.equal('dropstream: unknown command: acounts; did you mean `accounts`? (see `dropstream help`)');
      expect(failure(sub)).to.include('unknown command: accounts frobnicate');
      // A group alone lists its commands.
      expect(usageFailure(bare, 'dropstream accounts list')).to.include('unknown command: accounts');
    });

    it('when gc is given a negative grace, then it says what --grace takes, before asking the server anything', async () => {
      // ADMIN_URL points nowhere: had it asked, the line would say it cannot reach the admin API.
      const result = await runCli(['gc', '--grace', '-5'], { ADMIN_URL: 'http://127.0.0.1:1', ADMIN_TOKEN: 'x' });
      expect(failure(result)).to.equal('dropstream: --grace must be whole seconds from 0 (how old a leftover must be to go), not "-5"');
    });

    it('when the admin token is wrong, then the CLI reports 401', async () => {
      const result = await runCli(['plans', 'list'], { ...env, ADMIN_TOKEN: 'definitely-not-the-admin-token' });
      expect(failure(result)).to.include('401');
    });

    it('when the admin API is unreachable, then the CLI says where it looked', async () => {
      const result = await runCli(['plans', 'list'], { ADMIN_URL: 'http://127.0.0.1:1', ADMIN_TOKEN: server.server.adminToken });
      expect(failure(result)).to.include('cannot reach the admin API at http://127.0.0.1:1');
    });

    it('when there is neither ADMIN_TOKEN nor a token file, then the CLI says that DATA_DIR decides where it is, and the three ways to fix it', async () => {
      const empty = await mkdtemp(join(tmpdir(), 'dropstream-cli-'));
      try {
        const result = await runCli(['plans', 'list'], { ADMIN_URL: server.server.adminUrl, DATA_DIR: empty });
        expect(failure(result)).to.equal(
          `dropstream: no admin token: DATA_DIR decides where it is (DATA_DIR/admin-token, written by the server at its first start), and ${join(empty, 'admin-token')} does not exist (DATA_DIR=${empty}); ` +
            "run this from the server's folder, set DATA_DIR as the server has it, or set ADMIN_TOKEN (and ADMIN_URL when the server is elsewhere)",
        );
      } finally {
        await rm(empty, { recursive: true, force: true });
      }
    });

    it('when run from another folder without DATA_DIR, then the CLI says it looked in ./data of that folder', async () => {
      const elsewhere = await mkdtemp(join(tmpdir(), 'dropstream-elsewhere-'));
      try {
        const { code, stdout, stderr } = await runToExit([bin, 'plans', 'list'], { cwd: elsewhere, env: { ...baseEnv, ADMIN_URL: server.server.adminUrl } });
        expect(failure({ code, stdout, stderr, lines: [] })).to.include(`${join(elsewhere, 'data', 'admin-token')} does not exist (DATA_DIR is not set: ./data of the current folder)`);
      } finally {
        await rm(elsewhere, { recursive: true, force: true });
      }
    });
  });

  it('when ADMIN_TOKEN is not set, then the CLI reads DATA_DIR/admin-token', async () => {
    const out = jsonLine(await runCli(['accounts', 'create', '--plan', 'pro'], { ADMIN_URL: server.server.adminUrl, DATA_DIR: server.dataDir }));
    expect(out.plan).to.equal('pro');
    expect((await stats(out.api_key)).status).to.equal(200);
  });
});

/** A running `dropstream serve` child and its JSON log lines. */
interface ServeProcess {
  child: ChildProcess;
  logs: any[];
  stderr(): string;
  /** The first log line with this msg; waits for it, or rejects when the process exits or `timeoutMs` passes. */
  waitForLog(msg: string, timeoutMs?: number): Promise<any>;
}

function startServe(env: Record<string, string>, args: string[] = []): ServeProcess {
  const child = spawn(process.execPath, [bin, 'serve', ...args], { cwd: root, env: { ...baseEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: any[] = [];
  let pending = '';
  let stderr = '';
  let exited = false;
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((w) => w());
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) if (line) logs.push(JSON.parse(line));
    notify();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.once('exit', () => {
    exited = true;
    notify();
  });
  return {
    child,
    logs,
    stderr: () => stderr,
    waitForLog(msg, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => done(new Error(`no "${msg}" log within ${timeoutMs} ms; stderr: ${stderr}`)), timeoutMs);
        const check = () => {
          const found = logs.find((line) => line.msg === msg);
          if (found) done(undefined, found);
          else if (exited) done(new Error(`serve exited before logging "${msg}"; stderr: ${stderr}`));
        };
        const done = (err?: Error, line?: unknown) => {
          clearTimeout(timer);
          waiters.delete(check);
          if (err) reject(err);
          else resolve(line);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Waits for the child to exit; kills it and rejects after `timeoutMs`. */
async function exitOf(child: ChildProcess, timeoutMs = 15_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode };
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code, signal };
}

describe('dropstream serve', () => {
  let dataDir: string;
  let serve: ServeProcess | undefined;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-serve-'));
  });

  after(async () => {
    if (serve && serve.child.exitCode === null && serve.child.signalCode === null) {
      serve.child.kill('SIGKILL');
      await once(serve.child, 'exit');
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  it('when started on a fresh DATA_DIR, then it serves, the CLI provisions through it, and SIGTERM stops it cleanly', async () => {
    serve = startServe({ DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' });
    const listening = await serve.waitForLog('dropstream listening');
    expect(listening.url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(listening.adminUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(listening.database).to.equal('pglite');
    // The launcher set glibc's allocator and re-executed itself: the process spawned is the server.
    expect(await mallocEnv(serve.child.pid!)).to.deep.equal({ MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '65536' });
    // ...and V8's heap sizes (young generation, growth of the old one).
    expect(await nodeFlags(serve.child.pid!)).to.deep.equal(['--max-semi-space-size=32', '--heap-growing-percent=50']);
    expect(serve.logs.find((line) => line.msg === 'applied migrations')?.migrations).to.include.members(['20261121231846_init', '20261121231900_seed_plans']);

    const tokenFile = await stat(join(dataDir, 'admin-token'));
    expect(tokenFile.isFile()).to.equal(true);
    expect(tokenFile.mode & 0o777).to.equal(0o600);

    const account = jsonLine(await runCli(['accounts', 'create', '--plan', 'pro'], { DATA_DIR: dataDir, ADMIN_URL: listening.adminUrl }));
    expect(account.api_key).to.match(/^ds_live_/);

    const form = new FormData();
    form.append('file', new Blob(['hello from the CLI test']), 'hello.txt');
    const res = await fetch(`${listening.url}/api/v1/files/upload`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${account.api_key}` },
      body: form,
    });
    const body = (await res.json()) as { success: boolean; filename: string; size: number; public_link: string };
    expect(res.status).to.equal(201);
    expect(body).to.include({ success: true, filename: 'hello.txt', size: 23 });
    const download = await fetch(listening.url + new URL(body.public_link).pathname);
    expect(download.status).to.equal(200);
    expect(await download.text()).to.equal('hello from the CLI test');

    serve.child.kill('SIGTERM');
    const { code, signal } = await exitOf(serve.child);
    expect(signal, 'signal').to.equal(null);
    expect(code, 'exit code').to.equal(0);
    expect(serve.logs.some((line) => line.msg === 'shutting down' && line.signal === 'SIGTERM')).to.equal(true);
    // The log is written asynchronously; shutdown flushes it, so nothing is lost.
    const routes = serve.logs.filter((line) => line.msg === 'request').map((line) => `${line.route} ${line.status}`);
    expect(routes).to.include.members(['/api/v1/files/upload 201', '/download/:token 200']);
    expect(serve.logs.at(-1)?.msg).to.equal('stopped');
    expect(serve.stderr()).to.equal('');
  });

  it('when the operator set MALLOC_ARENA_MAX and a semi-space size, then serve keeps them and sets only the others', async () => {
    const otherDir = await mkdtemp(join(tmpdir(), 'dropstream-malloc-'));
    const other = startServe({ DATA_DIR: otherDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', MALLOC_ARENA_MAX: '4', NODE_OPTIONS: '--max-semi-space-size=8' });
    try {
      await other.waitForLog('dropstream listening');
      expect(await mallocEnv(other.child.pid!)).to.deep.equal({ MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '65536' });
      expect(await nodeFlags(other.child.pid!)).to.deep.equal(['--heap-growing-percent=50']);
      expect((await readFile(`/proc/${other.child.pid!}/environ`, 'utf8')).split('\0')).to.include('NODE_OPTIONS=--max-semi-space-size=8');
      // Signals reach the server itself: SIGINT stops it gracefully, exit code 0.
      other.child.kill('SIGINT');
      expect(await exitOf(other.child)).to.deep.equal({ code: 0, signal: null });
    } finally {
      if (other.child.exitCode === null && other.child.signalCode === null) other.child.kill('SIGKILL');
      await exitOf(other.child);
      await rm(otherDir, { recursive: true, force: true });
    }
  });

  it('when serve has listened and had no request for the quiet period, then it collects memory once (the tuning is the command\'s, src/memory/tune.ts)', async function () {
    this.timeout(60_000);
    const otherDir = await mkdtemp(join(tmpdir(), 'dropstream-tune-'));
    const other = startServe({ DATA_DIR: otherDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'debug' });
    try {
      const listening = await other.waitForLog('dropstream listening');
      // Health probes are not load: they neither count as requests nor hold the collection off.
      expect((await fetch(`${listening.url}/healthz`)).status).to.equal(200);
      // The first quiet period (10 s) settles the start whatever grew.
      const collected = await other.waitForLog('memory collected after load', 30_000);
      expect(collected).to.have.all.keys('level', 'time', 'msg', 'freed_mib', 'rss_freed_mib', 'took_ms');
      other.child.kill('SIGTERM');
      expect(await exitOf(other.child)).to.deep.equal({ code: 0, signal: null });
    } finally {
      if (other.child.exitCode === null && other.child.signalCode === null) other.child.kill('SIGKILL');
      await exitOf(other.child);
      await rm(otherDir, { recursive: true, force: true });
    }
  });

  it('when serve is given --port and --host, then it listens there, over PORT and HOST', async () => {
    const otherDir = await mkdtemp(join(tmpdir(), 'dropstream-port-'));
    const [port, envPort] = [await freePort(), await freePort()];
    const other = startServe({ DATA_DIR: otherDir, PORT: String(envPort), HOST: '0.0.0.0', ADMIN_PORT: '0' }, ['--port', String(port), '--host', '127.0.0.1']);
    try {
      const listening = await other.waitForLog('dropstream listening');
      expect(listening.url).to.equal(`http://127.0.0.1:${port}`);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
      other.child.kill('SIGTERM');
      expect(await exitOf(other.child)).to.deep.equal({ code: 0, signal: null });
    } finally {
      if (other.child.exitCode === null && other.child.signalCode === null) other.child.kill('SIGKILL');
      await exitOf(other.child);
      await rm(otherDir, { recursive: true, force: true });
    }
  });

  it('when serve is given a bad --port or a typo, then it exits before starting, with one line naming the flag', async () => {
    expect(failure(await runCli(['serve', '--port', 'abc'], { DATA_DIR: dataDir }))).to.equal('dropstream: --port must be a port number from 0 to 65535, not "abc"');
    expect(failure(await runCli(['serve', '--port', '70000'], { DATA_DIR: dataDir }))).to.include('--port must be a port number');
    expect(usageFailure(await runCli(['serve', '--prot', '8080'], { DATA_DIR: dataDir }), 'usage: dropstream serve')).to.equal('dropstream: unknown option --prot for `serve`; did you mean --port?');
  });

  it('when a config value is bad, then serve exits non-zero with a line naming the variable', async () => {
    const result = await runCli(['serve'], { DATA_DIR: dataDir, PORT: 'abc' });
    expect(failure(result)).to.match(/\bPORT\b/);
  });

  it('when the object store cannot be reached, then serve exits non-zero with one line naming bucket, endpoint and cause, and no stack', async () => {
    const result = await runCli(['serve'], { DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', LOG_LEVEL: 'silent', S3_ENDPOINT: 'http://127.0.0.1:1', S3_BUCKET: 'gone', S3_FORCE_PATH_STYLE: 'true', S3_ACCESS_KEY_ID: 'a', S3_SECRET_ACCESS_KEY: 'b' }, 60_000);
    expect(failure(result)).to.equal('dropstream: S3 cannot reach bucket: gone at http://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1');
  });
});

if (backends.includes('postgresql')) {
  describe('dropstream migrate (postgresql)', () => {
    let database: { url: string; drop(): Promise<void> };
    let dataDir: string;

    before(async () => {
      database = await createTestDatabase();
      dataDir = await mkdtemp(join(tmpdir(), 'dropstream-migrate-'));
    });

    after(async () => {
      await database?.drop();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('when run on a fresh database, then it applies both migrations, and a second run applies none', async () => {
      const env = { DATABASE_URL: database.url, DATA_DIR: dataDir };
      // A one-shot command must exit as soon as it is done, not linger on timers or pools.
      const folders = (await readdir(join(root, 'prisma', 'migrations'), { withFileTypes: true }))
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
        .sort();
      expect(folders).to.include.members(['20261121231846_init', '20261121231900_seed_plans']);
      const first = jsonLine(await runCli(['migrate'], env, 8000));
      expect(first).to.deep.equal({ applied: folders });
      const second = jsonLine(await runCli(['migrate'], env, 8000));
      expect(second).to.deep.equal({ applied: [] });
    });
  });
}
