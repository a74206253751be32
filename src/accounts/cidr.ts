// The address ranges a key may be used from (allowed_cidrs, issue 57).
import net from 'node:net';
import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** A CIDR range in its normal form ("10.1.0.0/16", "2001:db8::/32"), or undefined when it is not one. */
export function normalCidr(text: string): string | undefined {
  const [address, bits, ...rest] = text.split('/');
  if (rest.length > 0 || address === undefined || bits === undefined || !/^[0-9]{1,3}$/.test(bits)) return undefined;
  // net.isIP, not ipaddr.isValid: the latter also reads "2130706433" and "0x7f.1" as addresses.
  if (net.isIP(address) === 0) return undefined;
  try {
    const cidr = `${address}/${bits}`;
    const [parsed, length] = ipaddr.parseCIDR(cidr);
    // The network's first address: "10.1.2.3/16" means 10.1.0.0/16.
    const network = parsed.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(cidr) : ipaddr.IPv6.networkAddressFromCIDR(cidr);
    return `${network.toString()}/${length}`;
  } catch {
    return undefined;
  }
}

const range = (cidr: string): Range => ipaddr.parseCIDR(cidr) as Range;

/** Whether every address of `inner` is in `outer` (both normal CIDR ranges). */
export function within(inner: string, outer: string): boolean {
  const [innerAddress, innerBits] = range(inner);
  const [outerAddress, outerBits] = range(outer);
  return innerAddress.kind() === outerAddress.kind() && innerBits >= outerBits && innerAddress.match([outerAddress, outerBits] as never);
}

/** Whether `address` (a client address as Koa gives it) is in one of `cidrs`; an IPv4-mapped IPv6 address counts as its IPv4 address. */
export function allows(cidrs: readonly string[], address: string): boolean {
  if (net.isIP(address) === 0) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return cidrs.some((cidr) => {
    const [base, bits] = range(cidr);
    return base.kind() === parsed.kind() && parsed.match([base, bits] as never);
  });
}
