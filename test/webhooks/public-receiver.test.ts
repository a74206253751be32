// The other half of the address rule (issue 50): a receiver at a public
// address is delivered to, by IPv4, by IPv6 and by name. Public addresses
// cannot be reached from a test without the internet, so the receiver and
// the sender run in a private network namespace (`unshare -n`, as root)
// whose lo holds one public address of each family (public-receiver.child.ts).
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { notRun } from '../helpers/not-run.js';

const run = promisify(execFile);
const V4 = '93.184.215.14';
const V6 = '2606:4700:4700::1111';

const namespaces = spawnSync('unshare', ['-n', 'sh', '-c', 'ip link set lo up'], { stdio: 'ignore' }).status === 0;
if (!namespaces) {
  if (process.env.CI) throw new Error('CI must run the public receiver suite: `unshare -n` with `ip` failed (run as root, with util-linux and iproute2)');
  notRun('the public receiver suite (test/webhooks/public-receiver.test.ts: `unshare -n` with `ip` is not available here)', 'run npm test as root on Linux with util-linux and iproute2');
}

(namespaces ? describe : () => {})('webhook deliveries to a public address (a private network namespace)', function () {
  this.timeout(60_000);

  it('when the receiver is at a public IPv4 or IPv6 address, by address or by a name answering both, then the public-only agents deliver (204)', async () => {
    const setup = `ip link set lo up && ip addr add ${V4}/32 dev lo && ip -6 addr add ${V6}/128 dev lo nodad`;
    const { stdout } = await run('unshare', ['-n', 'sh', '-c', `${setup} && exec "$@"`, 'sh', process.execPath, '--import', 'tsx', 'test/webhooks/public-receiver.child.ts', V4, V6], { timeout: 45_000 });
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).to.deep.equal({
      [`http://${V4}/hook`]: { status: 204 },
      [`http://[${V6}]/hook`]: { status: 204 },
      'http://receiver.example/hook': { status: 204 },
    });
  });
});
