// The client a request is (src/client-key.ts), set once as ctx.ip for
// everything that counts per client.
import type { Socket } from 'node:net';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import ipaddr from 'ipaddr.js';
import { clientKey, proxyMatcher } from '../client-key.js';
import { atMostEvery } from '../log-throttle.js';

export interface ClientAddressOptions {
  /**
   * Peers whose X-Forwarded-For is believed: every peer ('all', TRUST_PROXY=true),
   * none, or the proxies' addresses and CIDR ranges.
   */
  trust: 'all' | 'none' | readonly string[];
  /** Entries our proxies append to X-Forwarded-For: the client is the one that many from the right. */
  hops: number;
  /** CLIENT_IPV6_PREFIX: the bits of an IPv6 address that name one client. */
  ipv6Prefix: number;
  /** A request with X-Forwarded-For came from a peer outside `trust`'s list (its header was not believed). */
  onUntrustedForward?: (peer: string) => void;
}

/**
 * Sets ctx.ip to the client's key (clientKey): from X-Forwarded-For when the
 * peer is a trusted proxy, otherwise the peer's own address. Everything that
 * counts per client reads ctx.ip; nothing else reads X-Forwarded-For.
 */
export function clientAddress({ trust, hops, ipv6Prefix, onUntrustedForward }: ClientAddressOptions): Middleware {
  const trusted = proxyMatcher(trust);
  // A connection's peer never changes: its key is worked out once, not on
  // every request a keep-alive connection carries (parsing the address was
  // a measurable part of a metadata request: docs/performance.md).
  const peerKeys = new WeakMap<Socket, string>();
  const peerKey = (socket: Socket, peer: string) => {
    let key = peerKeys.get(socket);
    if (key === undefined) {
      key = clientKey(peer, ipv6Prefix);
      peerKeys.set(socket, key);
    }
    return key;
  };
  return async (ctx, next) => {
    const socket = ctx.req.socket;
    const peer = socket.remoteAddress ?? '';
    const forwarded = ctx.get('X-Forwarded-For');
    let address: string | undefined;
    if (forwarded && trusted(peer)) {
      // The entry our nearest proxy appended, `hops` from the right; entries
      // further left were written by the client. One that is not an address
      // is not believed (a new string per request would be a new client).
      const entries = forwarded.split(',').map((entry) => entry.trim()).filter(Boolean);
      const entry = entries.slice(-hops)[0];
      if (entry && ipaddr.isValid(entry)) address = entry;
    } else if (forwarded && Array.isArray(trust)) onUntrustedForward?.(peer);
    ctx.request.ip = address === undefined ? peerKey(socket, peer) : clientKey(address, ipv6Prefix);
    await next();
  };
}

/**
 * X-Forwarded-For from a peer outside TRUST_PROXY's list is not believed,
 * and logged at most once a minute: a client reaching the app past the
 * proxy, or a proxy the list forgot (whose clients would all count as it).
 */
export function untrustedForwardLog(logger: Logger): (peer: string) => void {
  const due = atMostEvery(60_000);
  return (peer) => {
    if (!due()) return;
    logger.warn({ peer }, 'X-Forwarded-For from a peer that is not in TRUST_PROXY was ignored: a client reaching the app directly, or a proxy missing from the list');
  };
}
