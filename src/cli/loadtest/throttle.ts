// Throttling (429 and 503) is an outcome of its own: the server refusing
// work, neither success nor an error. Refusals by a rate limit are per
// account and by the upload cap per instance, so every worker of the run
// waits behind one shared gate once any of them was told Retry-After; the
// workers do not each knock again (issue 39: 1370 tus POSTs were answered
// 429 in 2 ms each while the limit's window had 50 s to go).
import { setTimeout as sleep } from 'node:timers/promises';

/** Attempts of one request (the first and its retries) while it is refused: then the operation ends throttled. */
export const MAX_ATTEMPTS = 4;
/** What a 429 or 503 without Retry-After is waited out for. */
export const DEFAULT_RETRY_AFTER_MS = 1000;

export const isThrottled = (status: number) => status === 429 || status === 503;

/** `Retry-After` as milliseconds from now (seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

export class ThrottleGate {
  /** No request is sent before this time (ms since the epoch). */
  private until = 0;
  /** Wall-clock time requests waited at the gate (several workers waiting at once count once). */
  waitedMs = 0;
  /** Up to where waitedMs has counted. */
  private countedUntil = 0;

  get heldUntil(): number {
    return this.until;
  }

  /** A refusal said to wait `ms` (Retry-After, or the default). */
  hold(ms: number | undefined): void {
    this.until = Math.max(this.until, Date.now() + (ms ?? DEFAULT_RETRY_AFTER_MS));
  }

  /**
   * Waits until requests may go again. False, at once, when that is past
   * `deadline` (waiting would only end the run idle) or when `signal` fires.
   */
  async pass(deadline: number, signal: AbortSignal): Promise<boolean> {
    const wait = this.until - Date.now();
    if (wait <= 0) return !signal.aborted;
    if (this.until > deadline || signal.aborted) return false;
    const now = Date.now();
    const until = this.until;
    this.waitedMs += Math.max(0, until - Math.max(now, this.countedUntil));
    this.countedUntil = Math.max(this.countedUntil, until);
    const ok = await sleep(wait, true, { signal }).catch(() => false);
    // Cut short (Ctrl-C): what was not waited is taken back.
    if (!ok && Date.now() < until) {
      this.waitedMs -= until - Date.now();
      this.countedUntil = Date.now();
    }
    return ok && !signal.aborted;
  }
}
