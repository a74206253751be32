// Run by ipv6-netns.test.ts inside a private network namespace whose lo has
// 2001:db8:1:2::10 .. ::19 (one /64) and 2001:db8:1:3::10 (another): a server
// listening on IPv6, and a client rotating among those addresses. Prints one
// JSON line with what each limit did.
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/start.js';
import { eventually } from '../helpers/raw-upload.js';

const ROTATING = Array.from({ length: 10 }, (_, i) => `2001:db8:1:2::${10 + i}`);
const OTHER = '2001:db8:1:3::10';
const ADMIN_TOKEN = 'a'.repeat(20) + 'b'.repeat(20);

const dataDir = await mkdtemp(join(tmpdir(), 'dropstream-netns-'));
const server = await startServer(
  loadConfig({
    HOST: '::', PORT: '0', ADMIN_HOST: '::', ADMIN_PORT: '0', DATA_DIR: dataDir, ADMIN_TOKEN, LOG_LEVEL: 'silent', GC_INTERVAL: '0',
    MAX_CONNECTIONS_PER_ADDRESS: '20', AUTH_FAILURE_LIMIT: '3', HEADERS_TIMEOUT: '60', ...(process.env.CLIENT_IPV6_PREFIX ? { CLIENT_IPV6_PREFIX: process.env.CLIENT_IPV6_PREFIX } : {}),
  }),
);
const port = (url: string) => Number(new URL(url).port);

/** A GET on [::1]'s port from `localAddress`; the status. */
const get = (url: string, path: string, localAddress: string, token: string) =>
  new Promise<number>((resolve, reject) => {
    request({ host: '2001:db8:1:2::10', port: port(url), path, localAddress, agent: false, headers: { Authorization: `Bearer ${token}` } }, (res) => {
      res.resume().on('end', () => resolve(res.statusCode!));
    }).on('error', reject).end();
  });

try {
  // 10 silent connections from each of the 10 addresses: 100 from one /64, capped at 20.
  const sockets: Socket[] = [];
  let closed = 0;
  for (const localAddress of ROTATING) {
    for (let i = 0; i < 10; i++) {
      sockets.push(await new Promise<Socket>((resolve) => {
        const socket = connect({ host: '2001:db8:1:2::10', port: port(server.url), localAddress });
        socket.on('error', () => {});
        socket.once('close', () => (closed += 1));
        socket.once('connect', () => resolve(socket));
      }));
    }
  }
  await eventually(async () => closed, (n) => n >= 80, 5_000);
  const connectionsKept = sockets.length - closed;
  const other = await new Promise<boolean>((resolve) => {
    const socket = connect({ host: '2001:db8:1:2::10', port: port(server.url), localAddress: OTHER });
    sockets.push(socket);
    socket.on('error', () => resolve(false));
    socket.once('connect', () => setImmediate(() => resolve(!socket.destroyed)));
  });
  for (const socket of sockets) socket.destroy();
  // The server sees the closes a moment later; until then the /64's connections are still at the cap.
  await eventually(() => get(server.url, '/healthz', ROTATING[0]!, '').catch(() => 0), (status) => status === 200, 5_000);

  const badKeys: number[] = [];
  for (const [i, from] of ROTATING.slice(0, 6).entries()) badKeys.push(await get(server.url, '/api/v1/stats', from, `ds_live_wrong${i}`));
  const badKeyOther = await get(server.url, '/api/v1/stats', OTHER, 'ds_live_wrong');
  const adminGuesses: number[] = [];
  for (const [i, from] of ROTATING.slice(0, 6).entries()) adminGuesses.push(await get(server.adminUrl, '/admin/plans', from, `wrong-token-${i}`.padEnd(40, 'x')));
  const adminOther = await get(server.adminUrl, '/admin/plans', OTHER, ADMIN_TOKEN);
  process.stdout.write(`${JSON.stringify({ connectionsKept, otherConnected: other, badKeys, badKeyOther, adminGuesses, adminOther })}\n`);
} finally {
  await server.close(1);
  await rm(dataDir, { recursive: true, force: true });
}
