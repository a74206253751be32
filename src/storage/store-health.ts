import type { StoreCallObserver } from './store-deadlines.js';

/**
 * Whether the store's recent calls are timing out, for /readyz, from the
 * outcomes of the calls requests make anyway: no write probe per check. Kept
 * per kind of call, since a store can hang writes while it still answers
 * reads (Ceph RGW when full): a HEAD that answers does not make the hanging
 * part uploads healthy. A kind counts as timing out from its timeout until a
 * call of that kind succeeds, or `windowMs` has passed with no new timeout
 * (an instance taken out of rotation may see no more such calls).
 */
export class StoreHealth {
  private readonly timedOutAt = new Map<string, number>();

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  readonly observe: StoreCallObserver = (operation, outcome) => {
    if (outcome === 'timeout') this.timedOutAt.set(operation, this.now());
    else if (outcome === 'ok') this.timedOutAt.delete(operation);
  };

  /** The kinds of call timing out now, e.g. ['upload_part']. */
  timingOut(): string[] {
    const since = this.now() - this.windowMs;
    for (const [operation, at] of this.timedOutAt) if (at < since) this.timedOutAt.delete(operation);
    return [...this.timedOutAt.keys()];
  }
}
