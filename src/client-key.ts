// Which client an address is, for every limit counted per client: bad-key
// lockouts, link-password and unknown-link guesses, admin-token guesses, and
// the connections per address (src/listener.ts); and which peers are our
// proxies (TRUST_PROXY). src/http/client-address.ts applies both to requests.
import ipaddr from 'ipaddr.js';

/**
 * The client an address counts as. IPv4 is itself (an IPv4-mapped IPv6
 * address, ::ffff:1.2.3.4 on a dual-stack socket, is its IPv4); IPv6 is its
 * network of `ipv6Prefix` bits, written "2001:db8:1:2::/64": a host is
 * usually given a whole /64, and rotating among its 2^64 addresses evaded
 * every per-address limit (issue 38: 2,000 connections from 10 addresses
 * all kept; 300 password guesses from 6 addresses all checked). Anything
 * that is not an address is returned as it is.
 */
export function clientKey(address: string, ipv6Prefix: number): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  if (ipv6Prefix >= 128) return v6.toString();
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${v6.toString()}/${ipv6Prefix}`).toString()}/${ipv6Prefix}`;
}

/** Whether TRUST_PROXY's value names proxies: an address or a CIDR range (10.0.0.5, 10.1.0.0/16, fd00::/8). */
export function isProxyRange(value: string): boolean {
  if (ipaddr.isValid(value)) return true;
  try {
    ipaddr.parseCIDR(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether `peer` is one of `trust`'s proxies: every peer ('all'), none, or
 * one inside a list of addresses and CIDR ranges (IPv4-mapped IPv6 peers
 * compare as IPv4).
 */
export function proxyMatcher(trust: 'all' | 'none' | readonly string[]): (peer: string) => boolean {
  if (trust === 'all') return () => true;
  if (trust === 'none') return () => false;
  const ranges = trust.map(toRange);
  return (peer) => {
    if (!ipaddr.isValid(peer)) return false;
    const address = unmapped(ipaddr.parse(peer));
    return ranges.some(([range, bits]) => address.kind() === range.kind() && address.match(range, bits));
  };
}

const unmapped = (address: ipaddr.IPv4 | ipaddr.IPv6) =>
  address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address;

function toRange(value: string): [ipaddr.IPv4 | ipaddr.IPv6, number] {
  if (value.includes('/')) {
    const [range, bits] = ipaddr.parseCIDR(value);
    return [unmapped(range), range.kind() === 'ipv6' && (range as ipaddr.IPv6).isIPv4MappedAddress() ? bits - 96 : bits];
  }
  const address = unmapped(ipaddr.parse(value));
  return [address, address.kind() === 'ipv4' ? 32 : 128];
}
