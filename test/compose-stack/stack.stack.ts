// The compose stack as an operator runs it: docker-compose.yml with the
// project's Caddyfile, PostgreSQL, Redis and (stood in for by Ceph RGW)
// MinIO, every request through the proxy. Run by .ci/compose-stack, which
// starts the engine in its own network namespace and runs this process
// there, so the proxy's published ports (3000, 3001) are this namespace's.
// Not in the default spec pattern (*.test.ts): it needs the engine, and only
// that CI step runs it (`mocha --config test/compose-stack/mocharc.json`);
// it fails, never skips, when the engine or the stack is missing.
// The tests run in order on one stack: each leaves it as the next expects.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  compose, curl, docker, logLines, metricValue, metricsOf, openMultipartUploads, replicas, required,
  servedBy, services, sha256, writeCounters, sleep, sqlNumber,
} from './stack.js';
import { startPollers } from '../helpers/keep-alive-pollers.js';

/** Healthy within this after `up` (43-47 s measured: the healthchecks' 15 s intervals dominate). */
const HEALTHY_WITHIN_S = 120;
const MiB = 1024 * 1024;
/** The file most tests move: larger than what the proxy's path buffers (see the slow download). */
const BIG = 96 * MiB;

const url = process.env.STACK_URL ?? 'http://127.0.0.1:3000';
const work = { dir: '', big: '', bigHash: '' };
const state = { key: '', token: '', link: '', fileId: 0 };

/** Prints a measured figure (the CI script collects these lines). */
const report = (line: Record<string, unknown>) => console.log(`      stack: ${JSON.stringify(line)}`);

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${state.key}`, ...(init.headers as Record<string, string>) } });
const apiJson = async (path: string) => {
  const res = await api(path);
  expect(res.status, `${path}: ${res.status}`).to.equal(200);
  return (await res.json()) as Record<string, any>;
};

/** Uploads a file with curl (streamed from disk, as operators' clients do); the parsed answer. */
async function upload(path: string, name: string): Promise<Record<string, any>> {
  const { code, out, err } = await curl(['--fail-with-body', '-H', `Authorization: Bearer ${state.key}`, '-F', `file=@${path};filename=${name}`, `${url}/api/v1/files/upload`]);
  expect(code, `upload: ${err} ${out}`).to.equal(0);
  return JSON.parse(out);
}

/** Downloads a link into a file and returns its sha256. */
async function downloadHash(link: string): Promise<string> {
  const out = join(work.dir, `down-${randomBytes(3).toString('hex')}`);
  const result = await curl(['--fail', '-o', out, link]);
  expect(result.code, `download ${link}: ${result.err}`).to.equal(0);
  const hash = await sha256(out);
  await rm(out);
  return hash;
}

/** A container's exit code (`docker stop` returns once it has exited). */
async function exitCodeOf(name: string): Promise<number> {
  return Number(await docker('inspect', '--format', '{{.State.ExitCode}}', name));
}

describe('compose stack through the proxy (docker-compose.yml, MinIO stood in for by RGW)', function () {
  this.timeout(300_000);

  before(async () => {
    required('DOCKER_HOST');
    required('COMPOSE_FILE');
    work.dir = await mkdtemp(join(tmpdir(), 'dropstream-stack-'));
    work.big = join(work.dir, 'big.bin');
    await writeFile(work.big, randomBytes(BIG));
    work.bigHash = await sha256(work.big);
  });

  afterEach(async function () {
    // A failure shows what the stack said.
    if (this.currentTest?.state !== 'failed') return;
    console.log(await compose(['ps', '--all']).catch((e) => String(e)));
    console.log(await compose(['logs', '--tail', '30', '--no-color']).catch((e) => String(e)));
  });

  after(async () => {
    if (work.dir) await rm(work.dir, { recursive: true, force: true });
  });

  it(`when \`up -d\` runs, then every service is healthy within ${HEALTHY_WITHIN_S} s and minio-init has exited 0`, async () => {
    const started = Date.now();
    await compose(['up', '-d', '--wait', '--wait-timeout', String(HEALTHY_WITHIN_S)]);
    const seconds = (Date.now() - started) / 1000;
    const all = await services(true);
    const health = Object.fromEntries(all.map((s) => [s.Service, s.Service === 'minio-init' ? `${s.State} ${s.ExitCode}` : s.Health]));
    expect(health).to.deep.equal({ proxy: 'healthy', app: 'healthy', postgres: 'healthy', redis: 'healthy', minio: 'healthy', 'minio-init': 'exited 0' });
    expect(seconds).to.be.below(HEALTHY_WITHIN_S);
    const res = await fetch(`${url}/healthz`);
    expect(res.status).to.equal(200);
    report({ up_healthy_s: Number(seconds.toFixed(1)) });
  });

  it('when `docker compose exec app dropstream accounts create --plan pro` runs, then it prints a key the API accepts through the proxy', async () => {
    const account = JSON.parse(await compose(['exec', '-T', 'app', 'dropstream', 'accounts', 'create', '--plan', 'pro']));
    expect(account.plan).to.equal('pro');
    expect(account.api_key).to.match(/^ds_live_/);
    state.key = account.api_key;
    state.token = await compose(['exec', '-T', 'app', 'cat', '/data/admin-token']);
    expect(state.token.length).to.be.at.least(16);
    expect((await apiJson('/api/v1/stats')).plan).to.equal('pro');
  });

  it('when a 96 MiB file is uploaded, then it is listed and downloads with the same sha256, and a Range answers 206 with those bytes', async () => {
    const body = await upload(work.big, 'big.bin');
    expect(body.size).to.equal(BIG);
    // PUBLIC_URL (.ci/compose-stack's .env) is the proxy's address: the link is served through it.
    expect(body.public_link.startsWith(`${url}/download/`), body.public_link).to.equal(true);
    state.link = body.public_link;
    state.fileId = body.file_id;
    const list = await apiJson('/api/v1/files');
    expect(list.files.map((f: { file_id: number; size: number }) => [f.file_id, f.size])).to.deep.equal([[state.fileId, BIG]]);
    expect(await downloadHash(state.link)).to.equal(work.bigHash);

    const res = await fetch(state.link, { headers: { Range: 'bytes=1000000-1999999' } });
    expect(res.status).to.equal(206);
    expect(res.headers.get('content-range')).to.equal(`bytes 1000000-1999999/${BIG}`);
    const part = Buffer.from(await res.arrayBuffer());
    expect(part.equals((await readFile(work.big)).subarray(1_000_000, 2_000_000))).to.equal(true);
  });

  it('when `up -d --scale app=3` runs, then three replicas are healthy and requests through the proxy reach every one', async () => {
    await compose(['up', '-d', '--scale', 'app=3', '--wait', '--wait-timeout', String(HEALTHY_WITHIN_S)]);
    const names = await replicas();
    expect(names).to.have.length(3);
    // The proxy re-reads the replicas' addresses every 5 s: send until each has served one, for up to 30 s.
    const seen = new Map<string, string>();
    const ids: string[] = [];
    for (let round = 0; new Set(seen.values()).size < 3 && round < 15; round++) {
      if (round) await sleep(2000);
      const batch = Array.from({ length: 6 }, (_, i) => `stack-${round}-${i}-${randomBytes(4).toString('hex')}`);
      for (const id of batch) {
        const res = await api('/api/v1/files', { headers: { 'x-request-id': id } });
        expect(res.status).to.equal(200);
        expect(res.headers.get('x-request-id')).to.equal(id);
        await res.arrayBuffer();
      }
      ids.push(...batch);
      for (const [id, name] of await servedBy(names, batch)) seen.set(id, name);
    }
    const perReplica = names.map((name) => [...seen.values()].filter((n) => n === name).length);
    expect(perReplica.every((n) => n > 0), `requests per replica: ${perReplica}`).to.equal(true);
    report({ requests: ids.length, per_replica: perReplica });
  });

  it('when the replica serving a download read at 4 MiB/s is stopped while it is still sending, then the download finishes intact and the replica exits 0', async () => {
    // Between the replica and this client, the sockets of the proxy and of
    // the engine's port forwarder buffer tens of MiB (about 50 measured here):
    // with 96 MiB, the replica still holds bytes in its own send queue long
    // after the stop, as in issue 21 (3.3 MB left unsent when it exited).
    const names = await replicas();
    const written = await writeCounters(names);
    const baseline = await written();
    const out = join(work.dir, 'slow.bin');
    const download = spawn('curl', ['-sS', '--fail', '--limit-rate', '4M', '-o', out, state.link], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    download.stderr.on('data', (d) => (stderr += d));
    const downloaded = once(download, 'close');
    const started = Date.now();
    // The replica serving it is the one whose writes run ahead: stop it as soon as it is seen.
    let victim = -1;
    let sent = 0;
    for (let waited = 0; victim < 0 && waited < 10_000; waited += 100) {
      await sleep(100);
      const now = await written();
      victim = now.findIndex((n, i) => n - baseline[i]! > MiB);
      if (victim >= 0) sent = now[victim]! - baseline[victim]!;
    }
    expect(victim, 'a replica writing the download').to.be.at.least(0);
    const name = names[victim]!;
    expect(download.exitCode, 'download still in flight').to.equal(null);

    // Six keep-alive clients polling through the proxy across the stop, a
    // third of their requests on the replica going (issue 51): each gets an
    // answer, never a 502 for a request the replica read and then reset.
    const pollers = startPollers(`${url}/healthz`);
    await pollers.warmedUp();
    const stopStarted = Date.now();
    const clientHad = (await stat(out).catch(() => ({ size: 0 }))).size;
    await docker('stop', name);
    const stopSeconds = (Date.now() - stopStarted) / 1000;
    pollers.stop();
    await pollers.done;
    const polled = pollers.polls.flat();
    expect(polled.filter((p) => !('status' in p) || p.status !== 200), 'polls through the proxy not answered 200').to.deep.equal([]);
    const [code] = await downloaded;
    const downloadSeconds = (Date.now() - started) / 1000;
    expect(code, `curl: ${stderr}`).to.equal(0);
    expect(await sha256(out)).to.equal(work.bigHash);
    await rm(out);
    expect(sent, 'bytes the replica had written when the stop came').to.be.below(BIG);
    expect(await exitCodeOf(name), 'exit code (137: killed at the grace period)').to.equal(0);
    const lines = await logLines(name);
    const shuttingDown = lines.find((line) => line.msg === 'shutting down');
    const stopped = lines.find((line) => line.msg === 'stopped');
    expect(stopped).to.include({ cut_connections: 0, still_delivering: 0, uploads_left: 0 });
    report({
      slow_download_s: Number(downloadSeconds.toFixed(1)), stop_after_s: Number(((stopStarted - started) / 1000).toFixed(1)),
      replica_had_written_mib: Number((sent / MiB).toFixed(1)), client_had_mib: Number((clientHad / MiB).toFixed(1)),
      drain_s: (stopped?.time - shuttingDown?.time) / 1000, docker_stop_s: Number(stopSeconds.toFixed(1)),
      polls_across_stop: polled.length,
    });
  });

  it('when the replica receiving an upload is stopped, then the upload fails and leaves nothing: no file, the same stats, no daily slot, no pending object, no multipart upload', async () => {
    const names = await replicas();
    expect(names, 'replicas running').to.not.be.empty;
    const statsBefore = (await apiJson('/api/v1/stats')).stats;
    const filesBefore = (await apiJson('/api/v1/files')).files;
    const slotsBefore = await sqlNumber('SELECT COALESCE(SUM(count), 0) FROM daily_uploads');

    // 96 MiB at 1 MiB/s: still sending when SHUTDOWN_TIMEOUT (30 s) ends, so the stop cuts it.
    const requestId = `stack-cut-upload-${randomBytes(4).toString('hex')}`;
    const uploadRun = curl([
      '-o', '/dev/null', '-w', '%{http_code}', '--limit-rate', '1M', '-H', `X-Request-Id: ${requestId}`,
      '-H', `Authorization: Bearer ${state.key}`, '-F', `file=@${work.big};filename=cut.bin`, `${url}/api/v1/files/upload`,
    ]);
    let receiving: string[] = [];
    for (let i = 0; receiving.length !== 1 && i < 20; i++) {
      await sleep(500);
      const inFlight = await Promise.all(names.map(async (name) => metricValue(await metricsOf(name), 'dropstream_uploads_in_flight')));
      receiving = names.filter((_, j) => inFlight[j]! > 0);
    }
    expect(receiving, 'replicas receiving the upload').to.have.length(1);
    const victim = receiving[0]!;
    const stopStarted = Date.now();
    await docker('stop', victim);
    const stopSeconds = (Date.now() - stopStarted) / 1000;
    const result = await uploadRun;
    expect(result.out, `upload answer (${result.err})`).to.not.equal('201');
    expect(await exitCodeOf(victim)).to.equal(0);
    const lines = await logLines(victim);
    const logged = lines.filter((line) => line.req_id === requestId);
    expect(logged.map((line) => line.status), 'the cut upload is logged as cut by the server').to.deep.equal([503]);
    expect(lines.find((line) => line.msg === 'stopped')).to.include({ cut_connections: 1, uploads_left: 0 });

    expect((await apiJson('/api/v1/stats')).stats).to.deep.equal(statsBefore);
    expect((await apiJson('/api/v1/files')).files).to.deep.equal(filesBefore);
    expect(await sqlNumber('SELECT COALESCE(SUM(count), 0) FROM daily_uploads')).to.equal(slotsBefore);
    expect(await sqlNumber('SELECT COUNT(*) FROM pending_objects')).to.equal(0);
    expect(await openMultipartUploads()).to.equal(0);
    report({ cut_upload_http: result.out, docker_stop_s: Number(stopSeconds.toFixed(1)) });
  });

  it('when the stack goes `down` and comes back `up` (APP_REPLICAS=3), then the file, the key and the admin token are kept, and no volume is left dangling', async () => {
    // Anonymous volumes `down` would leave behind (the shared engine may hold others, from the Docker smoke test).
    const danglingBefore = await docker('volume', 'ls', '-q', '--filter', 'dangling=true');
    await compose(['down']);
    expect(await services(true)).to.deep.equal([]);
    const started = Date.now();
    await compose(['up', '-d', '--wait', '--wait-timeout', String(HEALTHY_WITHIN_S)], { APP_REPLICAS: '3' });
    const seconds = (Date.now() - started) / 1000;
    expect(await replicas(), 'APP_REPLICAS=3').to.have.length(3);
    expect(await compose(['exec', '-T', '--index', '3', 'app', 'cat', '/data/admin-token'])).to.equal(state.token);
    const admin = await fetch('http://127.0.0.1:3001/admin/plans', { headers: { authorization: `Bearer ${state.token}` } });
    expect(admin.status, 'the admin API accepts the kept token').to.equal(200);
    const list = await apiJson('/api/v1/files');
    expect(list.files.map((f: { file_id: number }) => f.file_id)).to.deep.equal([state.fileId]);
    expect(await downloadHash(state.link)).to.equal(work.bigHash);
    expect(await docker('volume', 'ls', '-q', '--filter', 'dangling=true')).to.equal(danglingBefore);
    report({ down_up_healthy_s: Number(seconds.toFixed(1)) });
  });
});
