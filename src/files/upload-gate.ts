import { AppError } from '../errors.js';

/**
 * Caps uploads in flight, so memory stays bounded: each upload holds up to
 * (parts in flight + 1) parts. Over the cap an upload is refused at once with
 * 503 and Retry-After rather than queued: a queued upload would still hold a
 * connection and fill socket buffers while it waits.
 */
export class UploadGate {
  private active = 0;

  constructor(readonly capacity: number) {}

  get inFlight(): number {
    return this.active;
  }

  /** Takes a place; call the returned function exactly once when the upload ends. */
  enter(): () => void {
    if (this.active >= this.capacity) {
      throw new AppError('server_busy', 'Too many uploads in progress; try again shortly', { 'Retry-After': '5' });
    }
    this.active += 1;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.active -= 1;
    };
  }
}
