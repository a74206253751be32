// Uploads in flight through file requests, by request, so that closing a
// request, its expiry, or an upload's own deadline (REQUEST_UPLOAD_EXPIRY)
// cuts them on every instance at once instead of letting them run to a 201
// (issue 50: a 3 MB upload at 300 KB/s started 2 s before the owner closed
// the request was answered 201 and kept). After src/links/live-downloads.ts,
// three ways an end reaches an upload, so that a lost notice costs seconds:
// - a notice: the instance that closed the request cuts its own uploads at
//   once and tells the others on the notice carrier (channel
//   `request-closed`: Redis pub/sub, else PostgreSQL LISTEN/NOTIFY);
// - a check: every CHECK_MS while uploads run here, one query asks which of
//   their requests are closed or expired, and those are cut;
// - a timer per upload, at its deadline (the request's expiry, or the
//   upload's own time through the request, whichever comes first).
// Whatever slips past all three is refused by the statement that would save
// the file, which re-checks the request under its row lock
// (src/ledger/statements.ts: requestOpenSql).
import { uploadEnded, type UploadEnded } from '../files/errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';

/** How often the requests of uploads in flight are checked, as a backstop for lost notices. */
export const CHECK_MS = 3_000;

interface Live {
  requestId: string;
  stop: AbortController;
  timer?: NodeJS.Timeout;
}

export interface LiveRequestUploadsOptions {
  prisma: PrismaClient;
  /** Tells the other instances (server.ts: the notice carrier's request-closed channel); absent in tests of one instance. */
  publish?: (message: string) => Promise<unknown>;
  /** A notice or a check that failed: logged, never thrown (the check runs again, and the close itself stands). */
  onError: (err: unknown) => void;
  checkMs?: number;
}

/** When an upload must end by itself: the request's expiry, the upload's own deadline. */
export interface UploadDeadlines {
  requestExpiresAt?: Date | null;
  uploadDeadline?: Date;
}

const REQUEST_ID = /^req_[A-Za-z0-9_-]{16}$/;

export class LiveRequestUploads {
  private readonly live = new Set<Live>();
  private timer?: NodeJS.Timeout;
  private checking = false;

  constructor(private readonly options: LiveRequestUploadsOptions) {}

  /** Uploads through file requests running on this instance now. */
  get size(): number {
    return this.live.size;
  }

  /**
   * Registers an upload through request `requestId`: its signal aborts
   * (with an UploadEnded, the answer) when the request is closed or
   * expires, or at `uploadDeadline`; call done() once the upload ended.
   */
  track(requestId: string, { requestExpiresAt, uploadDeadline }: UploadDeadlines = {}): { signal: AbortSignal; done(): void } {
    const entry: Live = { requestId, stop: new AbortController() };
    this.live.add(entry);
    const expiry = requestExpiresAt?.getTime() ?? Number.POSITIVE_INFINITY;
    const deadline = uploadDeadline?.getTime() ?? Number.POSITIVE_INFINITY;
    const first = Math.min(expiry, deadline);
    if (Number.isFinite(first)) {
      const why = expiry <= deadline ? uploadEnded.requestExpired : uploadEnded.expired;
      // setTimeout holds at most 2^31-1 ms (24.8 days); a later deadline is left to the commit's check.
      const wait = Math.max(0, first - Date.now());
      if (wait < 2 ** 31) entry.timer = setTimeout(() => this.stopEntry(entry, why()), wait).unref();
    }
    this.timer ??= setInterval(() => void this.check(), this.options.checkMs ?? CHECK_MS).unref();
    return {
      signal: entry.stop.signal,
      done: () => this.forget(entry),
    };
  }

  /** After a close is committed: cuts this instance's uploads through the request, then tells the others. */
  async announce(requestId: string): Promise<void> {
    this.end(requestId);
    await this.options.publish?.(requestId).catch(this.options.onError);
  }

  /** A notice from another instance (or this one's own, back from the carrier: ending twice does nothing). */
  receive(message: string): void {
    if (REQUEST_ID.test(message)) this.end(message);
  }

  close(): void {
    this.stopChecking();
    for (const entry of this.live) clearTimeout(entry.timer);
  }

  private end(requestId: string): void {
    for (const entry of this.live) if (entry.requestId === requestId) this.stopEntry(entry, uploadEnded.requestClosed());
  }

  private stopEntry(entry: Live, reason: UploadEnded): void {
    this.forget(entry);
    entry.stop.abort(reason);
  }

  private forget(entry: Live): void {
    clearTimeout(entry.timer);
    this.live.delete(entry);
    if (this.live.size === 0) this.stopChecking();
  }

  private stopChecking(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Cuts the uploads whose requests are closed or expired. */
  private async check(): Promise<void> {
    if (this.checking || this.live.size === 0) return;
    this.checking = true;
    try {
      const ids = [...new Set([...this.live].map((entry) => entry.requestId))];
      const now = new Date();
      const rows = await this.options.prisma.fileRequest.findMany({ where: { id: { in: ids } }, select: { id: true, closedAt: true, expiresAt: true } });
      const state = new Map(rows.map((row) => [row.id, row]));
      for (const entry of this.live) {
        const row = state.get(entry.requestId);
        if (!row || row.closedAt) this.stopEntry(entry, uploadEnded.requestClosed());
        else if (row.expiresAt && row.expiresAt <= now) this.stopEntry(entry, uploadEnded.requestExpired());
      }
    } catch (err) {
      this.options.onError(err);
    } finally {
      this.checking = false;
    }
  }
}
