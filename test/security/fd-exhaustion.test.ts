// Issue 38, item 1: idle connections from a few addresses, each under the
// per-address cap, ran the process out of file descriptors, and the next
// call that needed one (process.memoryUsage.rss() in the idle collector)
// threw and ended it. A server process under `ulimit -n 400` here.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { call, uploadFile } from '../helpers/client.js';
import { eventually } from '../helpers/raw-upload.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

const OPEN_FILES = 400;
const ATTACKERS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
const PER_ATTACKER = 250;

/** Opens `count` silent connections from `localAddress`; resolves when each has connected or been closed. */
async function openSilent(url: string, localAddress: string, count: number): Promise<Socket[]> {
  const { hostname, port } = new URL(url);
  const one = () =>
    new Promise<Socket>((resolve) => {
      const socket = connect({ host: hostname, port: Number(port), localAddress });
      socket.on('error', () => {});
      socket.once('connect', () => resolve(socket));
      socket.once('close', () => resolve(socket));
    });
  const sockets: Socket[] = [];
  // In batches: the listen backlog (511) would drop a SYN flood of all of them at once.
  for (let i = 0; i < count; i += 50) sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, count - i) }, one))));
  return sockets;
}

const openFds = async (pid: number) => (await readdir(`/proc/${pid}/fd`)).length;
const alive = (server: ServerProcess) => server.child.exitCode === null && server.child.signalCode === null;
const logged = (server: ServerProcess, msg: string, from = 0) =>
  server.stdoutLines.slice(from).filter((line) => {
    try {
      return JSON.parse(line).msg === msg;
    } catch {
      return false;
    }
  });

describe('running out of file descriptors (issue 38)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let server: ServerProcess | undefined;
  let sockets: Socket[] = [];

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'dropstream-fds-'));
  });
  afterEach(async () => {
    for (const socket of sockets) socket.destroy();
    sockets = [];
    await server?.kill();
    server = undefined;
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A server under `ulimit -n 400` with one account and one stored file. */
  async function start(env: Record<string, string> = {}) {
    server = await startServerProcess({ DATA_DIR: dataDir, GC_INTERVAL: '0', HEADERS_TIMEOUT: '120', ...env }, { openFiles: OPEN_FILES });
    await server.admin('PUT', '/admin/plans/basic', { api_access: true, requests_per_minute: 1000, requests_per_day: 10000, max_file_size: 1024 * 1024, daily_uploads: 100 });
    const { api_key: key } = await server.admin('POST', '/admin/accounts', { plan: 'basic' });
    const content = randomBytes(4096);
    const stored = await uploadFile(server.url, key, 'a.bin', content);
    expect(stored.status).to.equal(201);
    // PUBLIC_URL is unset, so links name port 0: the path on the server's own address.
    const link = new URL(new URL(stored.body.public_link).pathname, server.url);
    const download = async () => {
      const res = await fetch(link).catch(() => undefined);
      return res?.ok ? Buffer.from(await res.arrayBuffer()).equals(content) : false;
    };
    return { server, download };
  }

  /** 3 x 250 silent connections, each address under MAX_CONNECTIONS_PER_ADDRESS (256). */
  const attack = async (url: string) => {
    for (const from of ATTACKERS) sockets.push(...(await openSilent(url, from, PER_ATTACKER)));
  };

  /**
   * Whether the process is still alive after the idle collector's next quiet
   * period (it looks every 10 s and reads the resident set when no request
   * came since its last look: two periods after the last request): polled,
   * so a death ends the wait at once.
   */
  const survivesCollector = async (s: ServerProcess) => eventually(async () => alive(s), (up) => !up, 22_000);

  it('when 750 silent connections come from 3 addresses, then the server sheds the oldest idle ones at MAX_CONNECTIONS (from the fd limit), stays up, serves, and warns once', async () => {
    const { server, download } = await start();
    const from = server.stdoutLines.length;
    await attack(server.url);
    expect(await openFds(server.child.pid!), 'open descriptors').to.be.below(OPEN_FILES);
    expect(await survivesCollector(server), 'alive after a quiet period').to.equal(true);
    expect(await eventually(download, (ok) => ok, 10_000), 'a download during the attack').to.equal(true);
    expect(logged(server, 'connections at MAX_CONNECTIONS: closing the oldest idle ones, or refusing new ones', from), 'warnings').to.have.length(1);
    const metrics = await call(`${server.adminUrl}/metrics`, { key: server.adminToken });
    const shed = Number(/^dropstream_connections_shed_total\{reason="idle_closed"\} (\d+)$/m.exec(metrics.text)?.[1] ?? 0);
    expect(shed, 'idle connections closed').to.be.above(0);
    expect(alive(server)).to.equal(true);
  });

  it('when the cap is off (MAX_CONNECTIONS=0) and the descriptors run out, then the process survives the idle collector at the limit and serves again once the connections close', async () => {
    const { server, download } = await start({ MAX_CONNECTIONS: '0' });
    await attack(server.url);
    // The server accepts the attack's connections as fast as a loaded machine lets it: wait for the limit.
    const atLimit = await eventually(() => openFds(server.child.pid!), (open) => open === OPEN_FILES, 10_000);
    expect(atLimit, 'open descriptors: the limit was reached').to.equal(OPEN_FILES);
    // The attacker keeps connecting, so a descriptor freed meanwhile (a
    // keep-alive connection of the set-up timing out) is taken again.
    let attacking = true;
    const sustained = (async () => {
      while (attacking) sockets.push(...(await openSilent(server.url, ATTACKERS[0]!, 5)));
    })();
    try {
      expect(await survivesCollector(server), 'alive after a quiet period at the limit').to.equal(true);
    } finally {
      attacking = false;
      await sustained;
    }
    for (const socket of sockets) socket.destroy();
    expect(await eventually(download, (ok) => ok || !alive(server), 15_000), 'a download after the attack').to.equal(true);
    expect(alive(server)).to.equal(true);
  });
});
