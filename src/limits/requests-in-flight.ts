// Requests in progress per account on this instance (issue 50). A request
// in progress holds a connection that the connection cap will not close for
// a newcomer while we are the slow side, so without a cap one key could hold
// all of an instance's connections at once. Counted per instance, in memory:
// what it protects is this instance's connections, and a shared count would
// cost a round trip on every request and leak on every crash. Uploads have
// their own cap across instances (the plan's concurrent_uploads,
// concurrent-uploads.ts) and may run for hours, so they get room of their
// own: an account's cap is ACCOUNT_REQUESTS_IN_FLIGHT plus its upload cap.
import { AppError } from '../errors.js';

/** Seconds a refused request is told to wait: requests other than uploads last milliseconds to seconds. */
const RETRY_AFTER_SECONDS = 1;

export class RequestsInFlight {
  private readonly running = new Map<number, number>();

  /** `others`: ACCOUNT_REQUESTS_IN_FLIGHT, the requests allowed besides uploads. */
  constructor(private readonly others: number) {}

  /**
   * Counts one more request of the account, whose plan allows `uploads` at
   * once, or throws 429 too_many_requests_in_flight. Call the returned
   * function once when the request is over; calling it again does nothing.
   */
  enter(accountId: number, uploads: number): () => void {
    const limit = this.others + uploads;
    const running = this.running.get(accountId) ?? 0;
    if (running >= limit) {
      throw new AppError('too_many_requests_in_flight', `The account has ${limit} requests in progress on this server; wait for one to finish`, {
        'Retry-After': String(RETRY_AFTER_SECONDS),
      });
    }
    this.running.set(accountId, running + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const remaining = (this.running.get(accountId) ?? 1) - 1;
      if (remaining > 0) this.running.set(accountId, remaining);
      else this.running.delete(accountId);
    };
  }
}
