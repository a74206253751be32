// Where webhook deliveries may connect (issue 50, items 6 and 7): every
// spelling of a private or special address is refused, whether it is written
// in the URL or answered by DNS, with an error that names neither the address
// nor the host (the account reads it as `last_error`). The sends go through
// the relay's own agents and send(), to a real receiver on this machine;
// names are answered by a resolver of the test's (createAgents' lookup).
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { LookupFunction } from 'node:net';
import { expect } from 'chai';
import { isPublicAddress, NotPublicAddressError, publicOnlyLookup } from '../../src/webhooks/public-address.js';
import { createAgents, send, type Agents, type SendResult } from '../../src/webhooks/send.js';

const REFUSED = 'destination is not a public address';

/** Addresses a delivery must never connect to, as a resolver or a URL may spell them, and why. */
const SPECIAL: [address: string, why: string][] = [
  ['::7f00:1', 'IPv4-compatible ::/96 (127.0.0.1)'],
  ['::a14:1e28', 'IPv4-compatible ::/96 (10.20.30.40)'],
  ['::ffff:7f00:1', 'IPv4-mapped 127.0.0.1'],
  ['::ffff:a9fe:a9fe', 'IPv4-mapped 169.254.169.254 (cloud metadata)'],
  ['64:ff9b::7f00:1', 'NAT64 well-known prefix, 127.0.0.1 inside'],
  ['64:ff9b::a00:1', 'NAT64 well-known prefix, 10.0.0.1 inside'],
  ['64:ff9b:1::a00:1', 'NAT64 local-use 64:ff9b:1::/48'],
  ['64:ff9b:1::808:808', 'NAT64 local-use 64:ff9b:1::/48, whatever is inside'],
  ['2002:7f00:1::1', '6to4 2002::/16, 127.0.0.1 inside'],
  ['2002:a14:1e28::1', '6to4 2002::/16, 10.20.30.40 inside'],
  ['2002:808:808::1', '6to4 2002::/16 (deprecated; refused whatever is inside)'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo 2001::/32'],
  ['2001:2::1', 'benchmarking 2001:2::/48'],
  ['2001:db8::1', 'documentation 2001:db8::/32'],
  ['3fff::1', 'documentation 3fff::/20'],
  ['fc00::1', 'unique-local fc00::/7'],
  ['fd12:3456:789a::1', 'unique-local fd00::/8'],
  ['fe80::1', 'link-local fe80::/10'],
  ['fec0::1', 'site-local fec0::/10 (deprecated)'],
  ['ff02::1', 'multicast ff00::/8'],
  ['ff0e::1', 'multicast, global scope'],
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['100::1', 'discard-only 100::/64'],
  ['4000::1', 'outside 2000::/3 (unassigned)'],
  ['0.0.0.0', 'this network (reaches this machine)'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback 127/8'],
  ['10.20.30.40', 'private 10/8'],
  ['172.16.0.1', 'private 172.16/12'],
  ['192.168.1.1', 'private 192.168/16'],
  ['169.254.169.254', 'link-local (cloud metadata)'],
  ['100.64.0.1', 'shared address space 100.64/10'],
  ['192.0.0.8', 'IETF protocol assignments 192.0.0/24'],
  ['192.0.2.1', 'documentation'],
  ['198.18.0.1', 'benchmarking 198.18/15'],
  ['224.0.0.1', 'multicast'],
  ['240.0.0.1', 'reserved 240/4'],
  ['255.255.255.255', 'broadcast'],
];

/** Addresses a delivery may connect to. */
const PUBLIC = ['8.8.8.8', '1.1.1.1', '93.184.215.14', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:808:808', '64:ff9b::808:808'];

/** URL spellings of special addresses (as the tenant may register them) and where they lead. */
const URL_SPELLINGS: [host: string, why: string][] = [
  ['[::7f00:1]', 'IPv4-compatible, hex (the probe\'s spelling)'],
  ['[::127.0.0.1]', 'IPv4-compatible, dotted'],
  ['[0:0:0:0:0:0:7f00:1]', 'IPv4-compatible, written out'],
  ['[::ffff:127.0.0.1]', 'IPv4-mapped, dotted'],
  ['[::ffff:7f00:1]', 'IPv4-mapped, hex'],
  ['[64:ff9b::127.0.0.1]', 'NAT64 well-known, dotted'],
  ['[64:ff9b:1::7f00:1]', 'NAT64 local-use'],
  ['[2002:7f00:1::]', '6to4 of 127.0.0.1'],
  ['[2001:0:4136:e378:8000:63bf:3fff:fdd2]', 'Teredo'],
  ['[fd00::1]', 'unique-local'],
  ['[fe80::1]', 'link-local'],
  ['[fec0::1]', 'site-local'],
  ['[ff02::1]', 'multicast'],
  ['[::]', 'unspecified'],
  ['[::1]', 'loopback'],
  ['2130706433', 'IPv4 as one decimal number'],
  ['0x7f.1', 'IPv4 in hex, two parts'],
  ['0x7f000001', 'IPv4 as one hex number'],
  ['0177.0.0.1', 'IPv4 in octal'],
  ['127.1', 'IPv4, two parts'],
  ['0', 'IPv4 0.0.0.0 as one number'],
  ['169.254.169.254', 'cloud metadata'],
  ['10.20.30.40', 'private'],
];

/** The spellings above that reach this machine when nothing refuses them (the controls). */
const REACHES_THIS_MACHINE = ['[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[::1]', '2130706433', '0x7f.1', '0x7f000001', '0177.0.0.1', '127.1', '0'];

/** A resolver that answers `name` with `addresses` (and fails every other name), as dns.lookup does, `all` or not. */
function resolver(name: string, addresses: string[]): LookupFunction & { asked: string[] } {
  const asked: string[] = [];
  const lookup = ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    asked.push(hostname);
    const answers = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    process.nextTick(() => {
      if (hostname !== name) callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
      else if (options.all) callback(null, answers);
      else callback(null, answers[0]!.address, answers[0]!.family);
    });
  }) as unknown as LookupFunction & { asked: string[] };
  lookup.asked = asked;
  return lookup;
}

describe('webhook destinations: public addresses only (issue 50)', function () {
  this.timeout(30_000);
  let receiver: Server;
  let port: number;
  let connections: number;
  let requests: number;

  before(async () => {
    // On :: (dual stack): IPv4, IPv4-mapped and ::1 connections all arrive here.
    receiver = createServer((req, res) => {
      requests++;
      req.resume().on('end', () => res.writeHead(204).end());
    });
    receiver.on('connection', () => connections++);
    receiver.listen(0, '::');
    await once(receiver, 'listening');
    port = (receiver.address() as { port: number }).port;
  });
  after(() => receiver?.close());
  beforeEach(() => {
    connections = 0;
    requests = 0;
  });

  const post = async (agents: Agents, url: string): Promise<SendResult> => {
    try {
      return await send(agents, url, {}, '{"type":"test"}', AbortSignal.timeout(5000));
    } finally {
      agents.destroy();
    }
  };

  describe('the rule (isPublicAddress)', () => {
    for (const [address, why] of SPECIAL) {
      it(`when the address is ${address} (${why}), then it is not public`, () => {
        expect(isPublicAddress(address)).to.equal(false);
      });
    }
    for (const address of PUBLIC) {
      it(`when the address is ${address}, then it is public`, () => {
        expect(isPublicAddress(address)).to.equal(true);
      });
    }
    it('when the text is not an address (a name, a CIDR, a zone), then it is not public', () => {
      for (const text of ['example.com', '8.8.8.8/32', 'fe80::1%eth0', '', '2130706433']) expect(isPublicAddress(text), text).to.equal(false);
    });
  });

  describe('an address written in the URL', () => {
    for (const [host, why] of URL_SPELLINGS) {
      it(`when the URL's host is ${host} (${why}), then the send is refused before connecting, naming no address`, async () => {
        const result = await post(createAgents(false, 4), `http://${host}:${port}/hook`);
        expect(result.error).to.equal(REFUSED);
        expect(result.status).to.equal(undefined);
        expect(connections).to.equal(0);
      });
    }

    for (const host of REACHES_THIS_MACHINE) {
      it(`when WEBHOOK_ALLOW_PRIVATE is on and the host is ${host}, then the send reaches this machine (the spelling is a real way in)`, async () => {
        const result = await post(createAgents(true, 4), `http://${host}:${port}/hook`);
        expect(result).to.deep.equal({ status: 204 });
        expect(requests).to.equal(1);
      });
    }
  });

  describe('a name that DNS answers with a special address', () => {
    for (const [address, why] of SPECIAL) {
      it(`when the name resolves to ${address} (${why}), then the send is refused, naming neither the address nor the name`, async () => {
        const lookup = resolver('internal-db.example', [address]);
        const result = await post(createAgents(false, 4, lookup), `http://internal-db.example:${port}/hook`);
        expect(lookup.asked).to.include('internal-db.example');
        expect(result.error).to.equal(REFUSED);
        expect(connections).to.equal(0);
        // The operator's log may have it: send() hands it over apart from the error.
        expect(result.detail).to.equal(`${address} (host internal-db.example)`);
      });
    }

    it('when a name resolves to a public address and a private one, then the send is refused (which one a connection takes is not ours to pick)', async () => {
      const lookup = resolver('mixed.example', ['2606:4700:4700::1111', '::7f00:1', '93.184.215.14']);
      const result = await post(createAgents(false, 4, lookup), `http://mixed.example:${port}/hook`);
      expect(result.error).to.equal(REFUSED);
      expect(connections).to.equal(0);
    });

    it('when the issue\'s internal name resolves to 10.20.30.40, then last_error\'s text is the refusal alone: no address, no host, no family', async () => {
      const lookup = resolver('internal-db', ['10.20.30.40']);
      const { error } = await post(createAgents(false, 4, lookup), `http://internal-db:${port}/`);
      expect(error).to.equal(REFUSED);
      for (const leak of ['10.20.30.40', 'internal-db', 'family', 'DNS lookup']) expect(error).to.not.include(leak);
    });

    it('when the resolver is asked for one address or for all (happy eyeballs), then a private one is refused either way and public ones pass unchanged', async () => {
      const ask = (addresses: string[], all: boolean) =>
        new Promise<{ err: unknown; address: unknown }>((resolve) => {
          publicOnlyLookup(resolver('r.example', addresses))('r.example', { all }, (err, address) => resolve({ err, address }));
        });
      for (const all of [false, true]) {
        const refused = await ask(['::7f00:1', '8.8.8.8'], all);
        expect(refused.err, `all: ${all}`).to.be.instanceOf(NotPublicAddressError);
        expect((refused.err as NotPublicAddressError).address).to.equal('::7f00:1');
      }
      expect((await ask(['8.8.8.8', '2606:4700:4700::1111'], false)).address).to.equal('8.8.8.8');
      expect((await ask(['8.8.8.8', '2606:4700:4700::1111'], true)).address).to.deep.equal([{ address: '8.8.8.8', family: 4 }, { address: '2606:4700:4700::1111', family: 6 }]);
    });

    it('when WEBHOOK_ALLOW_PRIVATE is on and a name resolves to 127.0.0.1, then the send reaches this machine through the same resolver', async () => {
      const lookup = resolver('receiver.example', ['127.0.0.1']);
      const result = await post(createAgents(true, 4, lookup), `http://receiver.example:${port}/hook`);
      expect(result).to.deep.equal({ status: 204 });
      expect(lookup.asked).to.deep.equal(['receiver.example']);
    });
  });
});
