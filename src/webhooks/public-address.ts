// Where a webhook delivery may connect (issues 44 and 50): public addresses
// only, judged on the address actually connected to, after DNS.
//
// An allow-list, not a list of private ranges: IPv6 is accepted only inside
// 2000::/3 (global unicast) minus the special ranges in it, so every spelling
// outside it (IPv4-compatible ::a.b.c.d, local-use NAT64 64:ff9b:1::/48,
// unique-local, link-local, site-local, multicast, the unspecified address
// and whatever IANA assigns there next) is refused without being named.
// Two IPv6 forms stand for an IPv4 address whose packets reach exactly that
// address (an IPv4-mapped one on a dual-stack socket, the well-known NAT64
// prefix through a translator): those are judged as that IPv4 address.
// docs/decisions.md has the choice and the alternatives.
import dns from 'node:dns';
import type http from 'node:http';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** IPv4 blocks that are not globally reachable (the IANA special-purpose registry), multicast, and the reserved 240/4. */
const IPV4_DENIED = [
  '0.0.0.0/8', // "this network"; 0.0.0.0 reaches this machine
  '10.0.0.0/8',
  '100.64.0.0/10', // shared address space (carrier-grade NAT)
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local, cloud metadata services
  '172.16.0.0/12',
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // documentation
  '192.88.99.0/24', // 6to4 relay anycast (deprecated)
  '192.168.0.0/16',
  '198.18.0.0/15', // benchmarking
  '198.51.100.0/24', // documentation
  '203.0.113.0/24', // documentation
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and the broadcast address
].map((cidr) => ipaddr.IPv4.parseCIDR(cidr));

const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

/** Special ranges inside 2000::/3 that are not a public receiver. */
const IPV6_DENIED = [
  '2001::/23', // IETF protocol assignments: Teredo 2001::/32 (tunnels to an IPv4 address), benchmarking, ORCHID
  '2001:db8::/32', // documentation
  '2002::/16', // 6to4: tunnels to the IPv4 address inside it (deprecated, RFC 7526)
  '3fff::/20', // documentation (RFC 9637)
].map((cidr) => ipaddr.IPv6.parseCIDR(cidr));

/** 64:ff9b::/96, the well-known NAT64 prefix: the last 32 bits are the IPv4 address the translator connects to. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

const publicIPv4 = (address: ipaddr.IPv4) => !IPV4_DENIED.some((range) => address.match(range));

/** Whether a delivery may connect to `address`, an IP literal (anything else is not an address: false). */
export function isPublicAddress(address: string): boolean {
  // net.isIP, not ipaddr.isValid: the latter also reads "2130706433" and "0x7f.1" as addresses.
  if (net.isIP(address) === 0) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return publicIPv4(parsed as ipaddr.IPv4);
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return publicIPv4(v6.toIPv4Address());
  if (v6.match(NAT64_WELL_KNOWN)) {
    const [high, low] = v6.parts.slice(6) as [number, number];
    return publicIPv4(new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]));
  }
  return v6.match(GLOBAL_UNICAST) && !IPV6_DENIED.some((range) => v6.match(range));
}

/**
 * A refused destination. The message is what the account sees (a delivery's
 * `last_error`): no address and no name, so a tenant cannot learn what an
 * internal name resolves to. The operator's log gets `address` and `host`.
 */
export class NotPublicAddressError extends Error {
  readonly code = 'ERR_NOT_PUBLIC_ADDRESS';
  constructor(
    readonly address: string,
    readonly host: string,
  ) {
    super('destination is not a public address');
  }
}

/** A `lookup` for net.connect that passes the resolver's answer on only when every address in it is public. */
export function publicOnlyLookup(lookup: net.LookupFunction = dns.lookup as net.LookupFunction): net.LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, options, (err, address, family) => {
      if (err) return callback(err, address, family);
      const answers = Array.isArray(address) ? address.map((a) => a.address) : [address];
      // One private address among public ones refuses the lot: which one a
      // connection would take (happy eyeballs) is not ours to predict.
      const refused = answers.find((a) => !isPublicAddress(a));
      if (refused !== undefined) return callback(new NotPublicAddressError(refused, hostname), '', 0);
      callback(null, address, family);
    });
  };
}

/**
 * Makes `agent` connect only to public addresses: an IP literal host is
 * judged before connecting (net.connect does no lookup for one), a name is
 * judged on each address its lookup answers.
 */
export function publicOnly<A extends http.Agent>(agent: A, lookup: net.LookupFunction): A {
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback) => {
    const host = options.host ?? options.hostname ?? '';
    if (net.isIP(host) !== 0 && !isPublicAddress(host)) {
      const refused = new NotPublicAddressError(host, host);
      // The agent's callback hands the error to the request ('error'); no socket is made.
      if (callback) {
        callback(refused, undefined as never);
        return undefined;
      }
      throw refused;
    }
    return create({ ...options, lookup } as typeof options, callback);
  };
  return agent;
}
