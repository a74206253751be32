// Issue 38, item 2, with real IPv6 sockets: a client rotating among the
// addresses of one /64 is one client to every per-address limit. The server
// and the client run in a private network namespace (`unshare -n`, as root)
// whose lo holds the addresses (ipv6-netns.child.ts).
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { notRun } from '../helpers/not-run.js';

const run = promisify(execFile);

async function inNamespace(env: Record<string, string> = {}) {
  const addresses = [...Array.from({ length: 10 }, (_, i) => `2001:db8:1:2::${10 + i}`), '2001:db8:1:3::10'];
  const setup = ['ip link set lo up', ...addresses.map((a) => `ip -6 addr add ${a}/64 dev lo nodad`)].join(' && ');
  const { stdout } = await run('unshare', ['-n', 'sh', '-c', `${setup} && exec "$@"`, 'sh', process.execPath, '--import', 'tsx', 'test/security/ipv6-netns.child.ts'], {
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

// A private namespace needs root (or user namespaces) and util-linux's unshare
// and iproute2's ip: where they are missing the suite is named as not run, as
// the PostgreSQL halves are; CI (root) must run it.
const namespaces = spawnSync('unshare', ['-n', 'sh', '-c', 'ip link set lo up'], { stdio: 'ignore' }).status === 0;
if (!namespaces) {
  if (process.env.CI) throw new Error('CI must run the IPv6 namespace suite: `unshare -n` with `ip` failed (run as root, with util-linux and iproute2)');
  notRun('the IPv6 /64 rotation suite (test/security/ipv6-netns.test.ts: `unshare -n` with `ip` is not available here)', 'run npm test as root on Linux with util-linux and iproute2');
}

(namespaces ? describe : () => {})('IPv6 rotation inside one /64 (a private network namespace)', function () {
  this.timeout(90_000);

  it('when a client rotates among 10 addresses of one /64, then the connection cap, bad keys and admin-token guesses count them as one client, and another /64 is apart', async () => {
    const seen = await inNamespace();
    expect(seen.connectionsKept, 'connections kept of 100 (MAX_CONNECTIONS_PER_ADDRESS 20)').to.equal(20);
    expect(seen.otherConnected, 'a connection from another /64').to.equal(true);
    expect(seen.badKeys, 'bad API keys from 6 addresses (AUTH_FAILURE_LIMIT 3)').to.deep.equal([401, 401, 401, 429, 429, 429]);
    expect(seen.badKeyOther, 'a bad key from another /64').to.equal(401);
    expect(seen.adminGuesses, 'wrong admin tokens from 6 addresses').to.deep.equal([401, 401, 401, 429, 429, 429]);
    expect(seen.adminOther, 'the admin token from another /64').to.equal(200);
  });

  it('when CLIENT_IPV6_PREFIX is 128, then each address is a client of its own again', async () => {
    const seen = await inNamespace({ CLIENT_IPV6_PREFIX: '128' });
    expect(seen.connectionsKept).to.equal(100);
    expect(seen.badKeys).to.deep.equal([401, 401, 401, 401, 401, 401]);
  });
});
