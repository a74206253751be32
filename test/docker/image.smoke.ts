// The Docker image as an operator runs it: built by .ci/docker-smoke (which
// starts a private Docker engine and sets DOCKER_HOST and DROPSTREAM_IMAGE),
// run on the host network against this machine's PostgreSQL and Redis.
// Not in the default spec pattern (*.test.ts): it needs the engine, and only
// that CI step runs it (`mocha --config test/docker/mocharc.json`); it fails,
// never skips, when the engine or the image is missing.
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { appendFile, chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createTestDatabase } from '../helpers/databases.js';
import { freePort } from '../helpers/ports.js';

const image = process.env.DROPSTREAM_IMAGE ?? '';
const dockerCli = process.env.DOCKER_CLI ?? '/usr/bin/docker';
/** Where the memory figures go (the CI script prints them at the end). */
const reportFile = process.env.SMOKE_REPORT;
const run = promisify(execFile);

async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run(dockerCli, args, { maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}
/** Runs docker and returns exit code, stdout and stderr, without throwing. */
async function dockerResult(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(dockerCli, args).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}
const curl = (...args: string[]) => run('curl', ['-sS', '--fail-with-body', ...args], { maxBuffer: 16 * 1024 * 1024 }).then((r) => r.stdout);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const inspect = async (name: string, format: string) => docker('inspect', '--format', format, name);

/** Waits for the image's own HEALTHCHECK (interval 15 s) to report healthy; fails on unhealthy or exit. */
async function waitHealthy(name: string, timeoutMs = 90_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const [status, health] = (await inspect(name, '{{.State.Status}} {{.State.Health.Status}}')).split(' ');
    if (health === 'healthy') return Date.now() - started;
    if (status !== 'running' || health === 'unhealthy') {
      throw new Error(`container ${name} is ${status}/${health}:\n${await docker('logs', '--tail', '30', name)}`);
    }
    if (Date.now() - started > timeoutMs) throw new Error(`container ${name} not healthy after ${timeoutMs} ms`);
    await sleep(500);
  }
}

/** The container's memory as `docker stats` shows it (cgroup usage less page cache), and node's resident set. */
async function memory(name: string): Promise<{ dockerStatsMiB: number; nodeRssMiB: number }> {
  const usage = (await docker('stats', '--no-stream', '--format', '{{.MemUsage}}', name)).split(' / ')[0] ?? '';
  const [, amount = '0', unit = 'MiB'] = /^([\d.]+)\s*([KMG]i?B)$/.exec(usage) ?? [];
  const factor: Record<string, number> = { KiB: 1 / 1024, MiB: 1, GiB: 1024, kB: 1 / 1024, MB: 1, GB: 1024 };
  const status = await docker('exec', name, 'cat', '/proc/1/status');
  const rssKiB = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  return { dockerStatsMiB: Math.round(Number(amount) * (factor[unit] ?? 1)), nodeRssMiB: Math.round(rssKiB / 1024) };
}

async function report(line: Record<string, unknown>): Promise<void> {
  console.log(`      ${JSON.stringify(line)}`);
  if (reportFile) await appendFile(reportFile, `${JSON.stringify(line)}\n`);
}

/** JSON log lines of the container (non-JSON lines kept as { text }). */
async function logLines(name: string): Promise<Record<string, any>[]> {
  const { stdout, stderr } = await dockerResult('logs', name);
  return `${stdout}\n${stderr}`
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, any>;
      } catch {
        return { text: line };
      }
    });
}

/** `docker stop` with docker's default grace period (10 s); returns the seconds it took and the exit code. */
async function stop(name: string): Promise<{ seconds: number; exitCode: number }> {
  const started = Date.now();
  await docker('stop', name);
  const seconds = (Date.now() - started) / 1000;
  return { seconds, exitCode: Number(await inspect(name, '{{.State.ExitCode}}')) };
}

interface Deployment {
  mode: 'postgresql' | 'embedded';
  name: string;
  url: string;
  key?: string;
  link?: string;
}

/** The test file, made in the root `before`: 64 MiB of random bytes and its sha256. */
const fixture = { work: '', file: '', hash: '' };

/** The checks both modes share: accounts via `docker exec`, an upload and a download compared by hash. */
function sharedChecks(d: Deployment) {
  it('when the container starts, then its HEALTHCHECK reports healthy and the server runs as uid 1000', async () => {
    const ms = await waitHealthy(d.name);
    expect(await docker('exec', d.name, 'id', '-u')).to.equal('1000');
    await sleep(2000);
    await report({ mode: d.mode, healthy_after_ms: ms, idle: await memory(d.name) });
  });

  it('when the server gives memory back after load, then it can call glibc\'s malloc_trim (koffi and its binary are in the image)', async () => {
    const script = "const { mallocTrim } = await import('/app/dist/memory/malloc-trim.js'); const trim = mallocTrim(); process.stdout.write(String(trim && typeof trim()));";
    expect(await docker('exec', d.name, 'node', '--input-type=module', '-e', script)).to.equal('boolean');
  });

  it('when `docker exec <c> dropstream accounts create --plan pro` runs, then it prints the new key (dropstream is on PATH)', async () => {
    const out = JSON.parse(await docker('exec', d.name, 'dropstream', 'accounts', 'create', '--plan', 'pro'));
    expect(out.plan).to.equal('pro');
    expect(out.api_key).to.match(/^ds_live_/);
    d.key = out.api_key;
  });

  it('when a 64 MiB file is uploaded and downloaded with curl, then the downloaded bytes have the same sha256', async () => {
    const body = JSON.parse(
      await curl('-H', `Authorization: Bearer ${d.key}`, '-F', `file=@${fixture.file};filename=smoke.bin`, `${d.url}/api/v1/files/upload`),
    );
    expect(body.size).to.equal(64 * 1024 * 1024);
    expect(body.public_link).to.match(new RegExp(`^${d.url}/download/`));
    d.link = body.public_link;
    const out = join(fixture.work, `${d.mode}.down`);
    await curl('-o', out, body.public_link);
    expect(await sha256(out)).to.equal(fixture.hash);
    await rm(out);
    await sleep(2000);
    await report({ mode: d.mode, after_upload_and_download: await memory(d.name) });
  });
}

describe('Docker image (smoke test against a private engine)', function () {
  this.timeout(180_000);
  const containers: string[] = [];
  const volumes: string[] = [];
  const tag = randomBytes(3).toString('hex');

  before(async () => {
    if (!image) throw new Error('DROPSTREAM_IMAGE is not set: run this through .ci/docker-smoke, which builds the image');
    if (!process.env.DOCKER_HOST) throw new Error('DOCKER_HOST is not set: run this through .ci/docker-smoke, which starts the engine');
    expect(await docker('image', 'inspect', '--format', '{{.Config.User}}', image)).to.equal('node');
    fixture.work = await mkdtemp(join(tmpdir(), 'dropstream-smoke-'));
    fixture.file = join(fixture.work, 'smoke.bin');
    await writeFile(fixture.file, randomBytes(64 * 1024 * 1024));
    fixture.hash = await sha256(fixture.file);
  });

  afterEach(async function () {
    // A failure shows what the containers said.
    if (this.currentTest?.state !== 'failed') return;
    for (const name of containers) console.log(`--- docker logs ${name}\n${(await dockerResult('logs', '--tail', '40', name)).stdout}`);
  });

  after(async () => {
    for (const name of containers) await dockerResult('rm', '-f', name);
    for (const volume of volumes) await dockerResult('volume', 'rm', volume);
    if (fixture.work) await rm(fixture.work, { recursive: true, force: true });
  });

  it("when the image is inspected, then its labels and `dropstream --version` name package.json's version and the commit it was built from", async () => {
    const version = (JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
    const revision = process.env.DROPSTREAM_REVISION ?? expect.fail('DROPSTREAM_REVISION is not set: .ci/docker-smoke passes the commit it builds');
    const labels = JSON.parse(await docker('image', 'inspect', '--format', '{{json .Config.Labels}}', image)) as Record<string, string>;
    expect(labels).to.include({ 'org.opencontainers.image.version': version, 'org.opencontainers.image.revision': revision });
    expect(await docker('run', '--rm', image, 'dropstream', '--version')).to.equal(`dropstream ${version} (commit ${revision})`);
  });

  describe('with PostgreSQL and Redis on the host network', () => {
    const d: Deployment = { mode: 'postgresql', name: `ds-smoke-pg-${tag}`, url: '' };
    let db: { url: string; drop(): Promise<void> };
    before(async () => {
      db = await createTestDatabase();
      const [port, adminPort] = [await freePort(), await freePort()];
      d.url = `http://127.0.0.1:${port}`;
      containers.push(d.name);
      await docker(
        'run', '-d', '--name', d.name, '--network', 'host',
        '-e', `PORT=${port}`, '-e', `ADMIN_PORT=${adminPort}`, '-e', `PUBLIC_URL=${d.url}`,
        '-e', `DATABASE_URL=${db.url}`,
        '-e', `REDIS_URL=${process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'}`, '-e', `REDIS_KEY_PREFIX=smoke-${tag}`,
        image,
      );
    });
    after(async () => {
      await dockerResult('rm', '-f', d.name);
      await db?.drop();
    });

    sharedChecks(d);

    it('when `docker stop` (default 10 s grace) comes during a download, then the download completes, the container exits 0 in time and logs "stopped"', async () => {
      // About 4 s at 16 MB/s: in flight when the stop comes, done well within SHUTDOWN_TIMEOUT (7 s in the image).
      const out = join(fixture.work, 'during-stop.bin');
      const download = spawn('curl', ['-sS', '--fail', '--limit-rate', '16M', '-o', out, d.link ?? ''], { stdio: ['ignore', 'ignore', 'pipe'] });
      const downloaded = once(download, 'close');
      await sleep(1000);
      const stopped = await stop(d.name);
      const [code] = await downloaded;
      expect(code, 'curl exit code').to.equal(0);
      expect(await sha256(out)).to.equal(fixture.hash);
      expect(stopped.exitCode, 'container exit code').to.equal(0);
      expect(stopped.seconds).to.be.below(10);
      const logs = await logLines(d.name);
      expect(logs.find((line) => line.msg === 'shutting down')?.timeout_s).to.equal(7);
      expect(logs.find((line) => line.msg === 'stopped')).to.include({ cut_connections: 0, uploads_left: 0 });
      await report({ mode: 'postgresql', docker_stop_during_download_s: Number(stopped.seconds.toFixed(2)) });
    });
  });

  describe('embedded (no DATABASE_URL) with a named volume on /data', () => {
    const d: Deployment = { mode: 'embedded', name: `ds-smoke-embedded-${tag}`, url: '' };
    const volume = `ds-smoke-data-${tag}`;
    before(async () => {
      const [port, adminPort] = [await freePort(), await freePort()];
      d.url = `http://127.0.0.1:${port}`;
      containers.push(d.name);
      volumes.push(volume);
      await docker('volume', 'create', volume);
      await docker(
        'run', '-d', '--name', d.name, '--network', 'host', '-v', `${volume}:/data`,
        '-e', `PORT=${port}`, '-e', `ADMIN_PORT=${adminPort}`, '-e', `PUBLIC_URL=${d.url}`,
        image,
      );
    });
    after(() => dockerResult('rm', '-f', d.name));

    sharedChecks(d);

    it('when the container restarts, then the account, its file and its download link are still there', async () => {
      const restarted = Date.now();
      await docker('restart', d.name);
      await waitHealthy(d.name);
      await report({ mode: 'embedded', restart_to_healthy_ms: Date.now() - restarted });
      const list = JSON.parse(await curl('-H', `Authorization: Bearer ${d.key}`, `${d.url}/api/v1/files`));
      expect(list.files.map((f: { filename: string }) => f.filename)).to.deep.equal(['smoke.bin']);
      const out = join(fixture.work, 'after-restart.bin');
      await curl('-o', out, d.link ?? '');
      expect(await sha256(out)).to.equal(fixture.hash);
      expect((await logLines(d.name)).filter((line) => line.msg === 'stopped')).to.have.length(1);
    });

    it('when `docker stop` comes during an upload and a download longer than the grace period, then they are cut at SHUTDOWN_TIMEOUT and the container still exits 0 in time', async () => {
      // 64 MiB at 2 MB/s each way: 30 s, far past the image's 7 s.
      const download = spawn('curl', ['-sS', '--limit-rate', '2M', '-o', '/dev/null', d.link ?? ''], { stdio: 'ignore' });
      const upload = spawn(
        'curl',
        ['-sS', '--limit-rate', '2M', '-H', `Authorization: Bearer ${d.key}`, '-F', `file=@${fixture.file};filename=cut.bin`, `${d.url}/api/v1/files/upload`],
        { stdio: 'ignore' },
      );
      const ended = Promise.all([once(download, 'close'), once(upload, 'close')]);
      await sleep(1000);
      expect([download.exitCode, upload.exitCode], 'both transfers in flight').to.deep.equal([null, null]);
      const stopped = await stop(d.name);
      await ended;
      expect(stopped.exitCode, 'container exit code (137 would be SIGKILL)').to.equal(0);
      expect(stopped.seconds).to.be.within(7, 10);
      const last = (await logLines(d.name)).filter((line) => line.msg === 'stopped').at(-1);
      expect(last?.cut_connections).to.be.at.least(2);
      expect(last?.uploads_left).to.equal(0);
      await report({ mode: 'embedded', docker_stop_cutting_transfers_s: Number(stopped.seconds.toFixed(2)) });
    });
  });

  describe('three replicas behind the compose Caddyfile (as `docker compose up --scale app=3` runs them)', () => {
    // Compose's network cannot be made here (the engine has no bridge), so
    // the replicas share the host network on three loopback addresses and
    // the proxy container resolves `app` to all three, as Docker's DNS does
    // for a scaled service. The Caddyfile is the repository's, with only the
    // port numbers changed.
    const replicas = ['127.0.0.2', '127.0.0.3', '127.0.0.4'].map((ip, i) => ({ ip, name: `ds-smoke-replica${i + 1}-${tag}` }));
    const proxyName = `ds-smoke-proxy-${tag}`;
    const volume = `ds-smoke-shared-${tag}`;
    let db: { url: string; drop(): Promise<void> };
    let publicUrl = '';
    let adminUrl = '';
    let key = '';
    const links: { link: string; hash: string }[] = [];

    before(async () => {
      const caddy = process.env.CADDY_BIN;
      if (!caddy) throw new Error('CADDY_BIN is not set: .ci/docker-smoke fetches Debian\'s caddy for this test');
      db = await createTestDatabase();
      const [appPort, appAdminPort, proxyPort, proxyAdminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
      publicUrl = `http://127.0.0.1:${proxyPort}`;
      adminUrl = `http://127.0.0.1:${proxyAdminPort}`;
      await docker('volume', 'create', volume);
      volumes.push(volume);
      // Started together on one DATA_DIR volume, as compose starts replicas: one generates the admin token, all use it.
      await Promise.all(
        replicas.map(({ ip, name }) => {
          containers.push(name);
          return docker(
            'run', '-d', '--name', name, '--network', 'host', '-v', `${volume}:/data`,
            '-e', `HOST=${ip}`, '-e', `PORT=${appPort}`, '-e', `ADMIN_HOST=${ip}`, '-e', `ADMIN_PORT=${appAdminPort}`,
            '-e', `DATABASE_URL=${db.url}`, '-e', `REDIS_URL=${process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'}`,
            '-e', `REDIS_KEY_PREFIX=smoke-scaled-${tag}`, '-e', 'TRUST_PROXY=true', '-e', `PUBLIC_URL=${publicUrl}`,
            image,
          );
        }),
      );
      let caddyfile = await readFile(new URL('../../Caddyfile', import.meta.url), 'utf8');
      for (const [from, to] of [
        [':3000 {', `:${proxyPort} {`],
        [':3001 {', `:${proxyAdminPort} {`],
        ['dynamic a app 3000 {', `dynamic a app ${appPort} {`],
        ['dynamic a app 3001 {', `dynamic a app ${appAdminPort} {`],
      ] as const) {
        // The public site has two routes (tus upload URLs kept on one replica, the rest round-robin), each naming the upstream.
        expect(caddyfile.split(from).length, `Caddyfile: ${from}`).to.be.at.least(2);
        caddyfile = caddyfile.replaceAll(from, to);
      }
      await writeFile(join(fixture.work, 'Caddyfile'), caddyfile);
      containers.push(proxyName);
      await docker(
        'run', '-d', '--name', proxyName, '--network', 'host', ...replicas.flatMap(({ ip }) => ['--add-host', `app:${ip}`]),
        '-v', `${caddy}:/usr/local/bin/caddy:ro`, '-v', `${join(fixture.work, 'Caddyfile')}:/etc/caddy/Caddyfile:ro`,
        'node:24-bookworm-slim', 'caddy', 'run', '--config', '/etc/caddy/Caddyfile', '--adapter', 'caddyfile',
      );
      for (const { name } of replicas) {
        for (let i = 0; !(await logLines(name)).some((line) => line.msg === 'dropstream listening'); i++) {
          if (i > 120 || (await inspect(name, '{{.State.Status}}')) !== 'running') throw new Error(`${name} did not start:\n${await docker('logs', name)}`);
          await sleep(500);
        }
      }
    });
    after(async () => {
      for (const name of [proxyName, ...replicas.map((r) => r.name)]) await dockerResult('rm', '-f', name);
      await db?.drop();
    });

    /** How many request log lines each replica wrote for this route. */
    const countLines = (route: string) =>
      Promise.all(replicas.map(async ({ name }) => (await logLines(name)).filter((line) => line.msg === 'request' && line.route === route).length));

    /**
     * The counts once `expected` lines are there in all, or after 3 s: the
     * server writes its log in batches, up to 250 ms after a request ends,
     * so the last lines may not be in `docker logs` yet.
     */
    const servedBy = async (route: string, expected: number) => {
      let counts = await countLines(route);
      for (let waited = 0; counts.reduce((a, b) => a + b, 0) < expected && waited < 3000; waited += 100) {
        await sleep(100);
        counts = await countLines(route);
      }
      return counts;
    };

    it('when admin calls, uploads and downloads go through the proxy, then every replica serves some, with one admin token', async () => {
      // The CLI in one replica, pointed at the proxy's admin port.
      const account = JSON.parse(await docker('exec', '-e', `ADMIN_URL=${adminUrl}`, replicas[0]!.name, 'dropstream', 'accounts', 'create', '--plan', 'pro'));
      key = account.api_key;
      const token = await docker('exec', replicas[1]!.name, 'cat', '/data/admin-token');
      for (let i = 0; i < 6; i++) expect(JSON.parse(await curl('-H', `Authorization: Bearer ${token}`, `${adminUrl}/admin/plans`)).success).to.equal(true);
      for (let i = 0; i < 6; i++) {
        const path = join(fixture.work, `replica-${i}.bin`);
        await writeFile(path, randomBytes(1024 * 1024 + i));
        const body = JSON.parse(await curl('-H', `Authorization: Bearer ${key}`, '-F', `file=@${path}`, `${publicUrl}/api/v1/files/upload`));
        expect(body.public_link.startsWith(`${publicUrl}/download/`), body.public_link).to.equal(true);
        links.push({ link: body.public_link, hash: await sha256(path) });
      }
      for (const { link, hash } of links) {
        const out = join(fixture.work, 'replica-down.bin');
        await curl('-o', out, link);
        expect(await sha256(out)).to.equal(hash);
      }
      const uploads = await servedBy('/api/v1/files/upload', 6);
      const downloads = await servedBy('/download/:token', 6);
      expect(uploads.every((n) => n > 0), `uploads per replica: ${uploads}`).to.equal(true);
      expect(downloads.every((n) => n > 0), `downloads per replica: ${downloads}`).to.equal(true);
      await report({ mode: 'scaled x3', uploads_per_replica: uploads, downloads_per_replica: downloads });
    });

    it('when one replica stops, then it exits 0 and requests through the proxy keep succeeding on the others', async () => {
      expect(links).to.have.length(6);
      const stopped = await stop(replicas[1]!.name);
      expect(stopped.exitCode).to.equal(0);
      const before = await servedBy('/download/:token', links.length);
      for (const { link, hash } of links) {
        const out = join(fixture.work, 'replica-down.bin');
        await curl('-o', out, link);
        expect(await sha256(out)).to.equal(hash);
      }
      const after = await servedBy('/download/:token', before.reduce((a, b) => a + b, 0) + links.length);
      expect(after[1]).to.equal(before[1]);
      expect(after[0]! + after[2]! - before[0]! - before[2]!).to.equal(links.length);
    });
  });

  describe('what stops the container at start', () => {
    it('when /data is a bind mount owned by root, then it exits 1 with one line naming /data and the uid to chown to', async () => {
      const hostDir = join(fixture.work, 'root-owned');
      await mkdir(hostDir);
      await chmod(hostDir, 0o755);
      const name = `ds-smoke-rootdata-${tag}`;
      containers.push(name);
      const result = await dockerResult('run', '--name', name, '--network', 'host', '-e', `PORT=${await freePort()}`, '-e', `ADMIN_PORT=${await freePort()}`, '-v', `${hostDir}:/data`, image);
      expect(result.code).to.equal(1);
      // The first write under /data fails (today mkdir of /data/pglite); whichever it is, the line names it.
      expect(result.stderr).to.match(
        /^dropstream: DATA_DIR \/data is not writable by this process, uid 1000 gid 1000 \(EACCES on \w+ '\/data(\/[^']*)?'\): chown -R 1000:1000 the directory \(on the host, for a bind mount\), or mount a named volume there\n$/,
      );
      expect(result.stdout).to.not.match(/\n\s+at /);
    });

    it('when the database port is closed, then it retries, one log line per attempt, and exits 1 with one line', async () => {
      const name = `ds-smoke-nodb-${tag}`;
      containers.push(name);
      const result = await dockerResult(
        'run', '--name', name, '--network', 'host', '-e', `PORT=${await freePort()}`, '-e', `ADMIN_PORT=${await freePort()}`,
        '-e', `DATABASE_URL=postgresql://postgres@127.0.0.1:${await freePort()}/x`, '-e', 'DATABASE_CONNECT_TIMEOUT=2',
        image,
      );
      expect(result.code).to.equal(1);
      // Pauses of 0.5 and 1 s, then what is left of the 2 s: three retries, unless an attempt is slow.
      const retries = result.stdout.split('\n').filter((line) => line.includes('"database not reachable, retrying"'));
      expect(retries.length).to.be.within(2, 3);
      expect(result.stderr).to.match(
        new RegExp(
          `^dropstream: database at 127\\.0\\.0\\.1:\\d+/x not reachable after 2 s \\(${retries.length + 1} attempts\\): ` +
            "Can't reach database server at 127\\.0\\.0\\.1:\\d+; DATABASE_CONNECT_TIMEOUT sets how long to wait\n$",
        ),
      );
    });
  });
});
