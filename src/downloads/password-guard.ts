// The limits a link password is checked under (issue 38): the client
// address's failures (LINK_FAILURE_LIMIT a minute, shared with unknown
// links) and the link's wrong passwords from every address
// (LINK_PASSWORD_FAILURE_LIMIT, then the link's password is locked for
// LINK_PASSWORD_LOCK seconds), both on rate-limiter-flexible, so every
// instance shares them through Redis.
import type { GuessOutcome, PasswordGuard } from '../links/download.js';
import { linkErrors } from '../links/errors.js';
import type { FailureLimits } from '../limits/failure-limits.js';
import type { Metrics } from '../metrics.js';
import { tooManyFailures } from '../http/rate-limit.js';

export interface PasswordLimits {
  /** Failures per client address (unknown links and wrong passwords alike). */
  address: FailureLimits;
  /** Wrong passwords per link, from all addresses. */
  link: FailureLimits;
  metrics?: Metrics;
}

/**
 * The guard of one request from `address`. A store that fails (Redis away
 * with no insurance answer) lets the check go on, as the other failure
 * limits do: scrypt's queue still bounds the work.
 */
export function passwordGuard({ address: byAddress, link: byLink, metrics }: PasswordLimits, address: string): PasswordGuard {
  const locked = (seconds: number) => {
    metrics?.rateLimitRefusals.inc({ reason: `${byLink.options.name}_failures` });
    return linkErrors.passwordLocked(seconds);
  };
  return {
    async check(linkId) {
      const [addressWait, linkWait] = await Promise.all([byAddress.waitSeconds(address).catch(() => 0), byLink.waitSeconds(linkId).catch(() => 0)]);
      if (addressWait > 0) throw tooManyFailures(byAddress, addressWait, metrics);
      if (linkWait > 0) throw locked(linkWait);
    },
    async reserve(linkId) {
      // The address first, and the link only for a guess the address may
      // make: taken together (one round trip), a burst from one address
      // that its own limit refuses still took the link's points until they
      // were given back, and past the link's limit that set its lock
      // (LINK_PASSWORD_LOCK), though at most LINK_FAILURE_LIMIT guesses
      // were checked.
      const addressWait = await byAddress.reserve(address).catch(() => 0);
      if (addressWait > 0) throw tooManyFailures(byAddress, addressWait, metrics);
      const linkWait = await byLink.reserve(linkId).catch(() => 0);
      if (linkWait > 0) {
        // Not checked: the address gets its point back.
        await byAddress.refund(address).catch(() => {});
        throw locked(linkWait);
      }
      return async (outcome: GuessOutcome) => {
        if (outcome === 'wrong') return;
        await Promise.all([byAddress.refund(address), byLink.refund(linkId)]).catch(() => {});
      };
    },
  };
}
