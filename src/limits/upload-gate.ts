import { AppError } from '../errors.js';

/**
 * The share of an instance's upload places no single account may take: a
 * quarter (at least one place, once there are two). Without it one tenant
 * trickling on a plan without concurrent_uploads held all 32 places of an
 * instance and every other account got 503 for as long as it liked (issue 38).
 */
export function reservedPlaces(capacity: number): number {
  return capacity < 2 ? 0 : Math.max(1, Math.floor(capacity / 4));
}

const busy = () => new AppError('server_busy', 'Too many uploads in progress; try again shortly', { 'Retry-After': '5' });

/**
 * Caps uploads in flight, so memory stays bounded: each upload holds up to
 * (parts in flight + 1) parts. Over the cap an upload is refused at once with
 * 503 and Retry-After rather than queued: a queued upload would still hold a
 * connection and fill socket buffers while it waits. One account gets at
 * most `perAccount` of the places (capacity less reservedPlaces), so the
 * rest stay open to the others whatever its plan allows.
 */
export class UploadGate {
  private active = 0;
  /** Places held per account on this instance. */
  private readonly byAccount = new Map<number, number>();
  /** The most places one account may hold here. */
  readonly perAccount: number;

  constructor(readonly capacity: number) {
    this.perAccount = capacity - reservedPlaces(capacity);
  }

  get inFlight(): number {
    return this.active;
  }

  /** Takes a place for `accountId`'s upload; call the returned function exactly once when the upload ends. */
  enter(accountId: number): () => void {
    const held = this.byAccount.get(accountId) ?? 0;
    if (this.active >= this.capacity || held >= this.perAccount) throw busy();
    this.active += 1;
    this.byAccount.set(accountId, held + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.active -= 1;
      const rest = (this.byAccount.get(accountId) ?? 1) - 1;
      if (rest > 0) this.byAccount.set(accountId, rest);
      else this.byAccount.delete(accountId);
    };
  }
}
