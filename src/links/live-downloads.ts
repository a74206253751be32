// Downloads in flight, by link, so that revoking a link (or deleting its
// file) ends them on every instance within seconds instead of letting them
// run to their end (issue 38: a 20 MiB download at 1 MB/s finished in full
// after its link was revoked; at DOWNLOAD_MIN_RATE one could run for hours).
//
// Two ways an end reaches a download, so that a lost notice costs seconds,
// not hours:
// - a notice: the instance that revoked or deleted ends its own downloads at
//   once and tells the others over the instances' notice carrier
//   (src/notices: Redis pub/sub, else PostgreSQL LISTEN/NOTIFY);
// - a check: every CHECK_MS while downloads run here, one query asks which
//   of their links still exist (links go with their file, ON DELETE
//   CASCADE, so a file deleted or swept is seen too), and the rest end.
import type { PrismaClient } from '../generated/prisma/client.js';

/** How often the links of downloads in flight are checked, as a backstop for lost notices. */
export const CHECK_MS = 3_000;

/** What ended: one link, or every link of a file. */
export type Ended = { link: string } | { file: number };

interface Live {
  linkId: string;
  fileId: number;
  stop: AbortController;
}

export interface LiveDownloadsOptions {
  prisma: PrismaClient;
  /** Tells the other instances (server.ts: the notice carrier's link-ended channel); absent in tests of one instance. */
  publish?: (message: string) => Promise<unknown>;
  /** A notice or a check that failed: logged, never thrown (the check runs again, and the revocation itself stands). */
  onError: (err: unknown) => void;
  checkMs?: number;
}

/** A notice as sent between instances: `link:<uuid>` or `file:<id>`. */
const encode = (ended: Ended) => ('link' in ended ? `link:${ended.link}` : `file:${ended.file}`);

function decode(message: string): Ended | undefined {
  const [kind, value = ''] = message.split(':', 2);
  if (kind === 'link' && value) return { link: value };
  if (kind === 'file' && /^[0-9]{1,10}$/.test(value)) return { file: Number(value) };
  return undefined;
}

export class LiveDownloads {
  private readonly live = new Set<Live>();
  private timer?: NodeJS.Timeout;
  private checking = false;

  constructor(private readonly options: LiveDownloadsOptions) {}

  /** Downloads running on this instance now. */
  get size(): number {
    return this.live.size;
  }

  /**
   * Registers a download of `linkId` (of file `fileId`): its signal aborts
   * when the link ends; call done() once the response has ended.
   */
  track(linkId: string, fileId: number): { signal: AbortSignal; done(): void } {
    const entry: Live = { linkId, fileId, stop: new AbortController() };
    this.live.add(entry);
    this.timer ??= setInterval(() => void this.check(), this.options.checkMs ?? CHECK_MS).unref();
    return {
      signal: entry.stop.signal,
      done: () => {
        this.live.delete(entry);
        if (this.live.size === 0) this.stopChecking();
      },
    };
  }

  /** After a revocation or deletion is committed: ends this instance's downloads of it, then tells the others. */
  async announce(ended: Ended): Promise<void> {
    this.end(ended);
    await this.options.publish?.(encode(ended)).catch(this.options.onError);
  }

  /** A notice from another instance (or this one's own, back from the carrier: ending twice does nothing). */
  receive(message: string): void {
    const ended = decode(message);
    if (ended) this.end(ended);
  }

  close(): void {
    this.stopChecking();
  }

  private end(ended: Ended): void {
    for (const entry of this.live) {
      if ('link' in ended ? entry.linkId === ended.link : entry.fileId === ended.file) this.stopEntry(entry);
    }
  }

  private stopEntry(entry: Live): void {
    this.live.delete(entry);
    entry.stop.abort(new Error('the link was revoked or its file deleted'));
    if (this.live.size === 0) this.stopChecking();
  }

  private stopChecking(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Ends the downloads whose links no longer exist. */
  private async check(): Promise<void> {
    if (this.checking || this.live.size === 0) return;
    this.checking = true;
    try {
      const ids = [...new Set([...this.live].map((entry) => entry.linkId))];
      const found = await this.options.prisma.link.findMany({ where: { id: { in: ids } }, select: { id: true } });
      const existing = new Set(found.map((row) => row.id));
      for (const entry of this.live) if (!existing.has(entry.linkId)) this.stopEntry(entry);
    } catch (err) {
      this.options.onError(err);
    } finally {
      this.checking = false;
    }
  }
}
