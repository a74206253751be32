// A download through a public link, in two phases, so HTTP never hands the
// domain a callback:
// - authorise (token, password, expiry -> a grant): the link's rules are
//   checked here, in this order: known (undefined: 404), neither it nor its
//   file expired (410), a password link embedded by another site's page
//   (403), password (401), budget (410);
// - open (grant, range -> a stream and a settle): a limited link's bytes are
//   reserved before any body is opened; or hand out (grant -> a presigned
//   URL of the store), when downloads are offloaded.
// Between the two, HTTP decides from the grant's file what to send (headers,
// 304, HEAD, the range) without anything reserved or opened.
import type { Readable } from 'node:stream';
import type { ByteRange, ObjectStore } from '../storage/object-store.js';
import type { PooledRead } from '../storage/pooled-read.js';
import { linkErrors } from './errors.js';
import { verifiedLately, verifyPassword } from './link-password.js';
import { budgetOf, chargeOf, slackOf, type FileLinks, type LinkedFile } from './links.js';
import type { LiveDownloads } from './live-downloads.js';
import { systemClock, type Clock } from '../clock.js';

/** How a password check went: a right one, or one never checked (refused before, or failed), is given back. */
export type GuessOutcome = 'right' | 'wrong' | 'unchecked';

/**
 * The failure limits a link password is checked under (the download route
 * keeps them: the client's address and the link, issue 38). Either method
 * throws to refuse, and a refused request's password is not checked at all,
 * right or not: from a locked-out address a right answer would still tell
 * a guesser when it is right.
 */
export interface PasswordGuard {
  /** For a password verified lately (no scrypt, so no guess to count): throws when the address or the link is locked. */
  check(linkId: string): Promise<void>;
  /** Counts a guess before it is checked (so a burst cannot all pass one read of the count); the returned function settles it once. */
  reserve(linkId: string): Promise<(outcome: GuessOutcome) => Promise<void>>;
}

/**
 * Whether `password` is the one `hash` was made from, checked under `guard`
 * for `key` (a link's id, or another key in the same limiter): a password
 * verified lately costs no scrypt and is only checked against the locks; any
 * other is counted before scrypt runs and settled after.
 */
export async function guardedPasswordCheck(password: string, hash: string, key: string, guard?: PasswordGuard): Promise<boolean> {
  if (verifiedLately(password, hash)) {
    await guard?.check(key);
    return true;
  }
  const settle = (await guard?.reserve(key)) ?? (async () => {});
  let outcome: GuessOutcome = 'unchecked';
  try {
    outcome = (await verifyPassword(password, hash)) ? 'right' : 'wrong';
  } finally {
    await settle(outcome);
  }
  return outcome === 'right';
}

export interface DownloadCredentials {
  /** The password the request carries, if any. */
  password?: string;
  /** Without it, guessing is bounded by nothing but scrypt's queue. */
  guard?: PasswordGuard;
  /**
   * The request is another site's page using the browser (an image, a
   * frame, a fetch; not a link followed from there): its password may be
   * the one the browser cached, not one its sender knows (issue 50).
   */
  embedded?: boolean;
}

/** Leave to download a file through one link, as checked at one moment: what open() and handOut() take. */
export interface DownloadGrant {
  readonly file: LinkedFile;
  readonly linkId: string;
  /** The link's byte budget (max_downloads x size); absent for an unlimited link. */
  readonly budget?: number;
  readonly maxDownloads?: number;
  /** When the first of the link and its file expires; absent: never. */
  readonly expiresAt?: Date;
  /** The link has a password: its bytes are only ever sent by us, to a request that carried it. */
  readonly hasPassword: boolean;
}

export interface OpenedDownload {
  /** Bytes of the body (of the range, or the file). */
  length: number;
  /** A stream, or bytes in reused buffers written straight to the response (PooledRead, S3's pooled reads). */
  body: Readable | PooledRead;
  /** A limited link's download: what settle() is given is charged to its budget, so it is worth measuring well. */
  limited: boolean;
  /**
   * Call once, when the response has ended, with the bytes handed on to the
   * connection: all of them count a complete download when the whole file
   * was sent; fewer give the rest of a limited link's reservation back.
   */
  settle(sent: number): Promise<void>;
  /** Aborts when the link is revoked or its file deleted, on any instance (live-downloads.ts): end the response then. */
  revoked?: AbortSignal;
}

/** Downloads handed to the store (S3_PRESIGNED_DOWNLOADS): a client fetches a presigned URL instead of the bytes through us. */
export interface OffloadOptions {
  /** The longest a URL lives (S3_PRESIGN_SECONDS); less when the link expires sooner. */
  seconds: number;
}

export class Downloads {
  constructor(
    private readonly links: FileLinks,
    private readonly store: ObjectStore,
    private readonly clock: Clock = systemClock,
    /** The registry that ends downloads of revoked links; absent: they run to their end. */
    private readonly live?: LiveDownloads,
    /** Absent, or a store that cannot presign: every download goes through us. */
    private readonly offload?: OffloadOptions,
  ) {}

  /** Leave to download through `token`; undefined for no such link (the caller counts the guess). Throws 410/401 as the link's rules say. */
  async authorise(token: string, credentials: DownloadCredentials = {}): Promise<DownloadGrant | undefined> {
    const resolved = await this.links.resolve(token);
    if (!resolved) return undefined;
    const { link, file } = resolved;
    const now = this.clock();
    // The file's expiry ends every link to it, until the sweeper deletes it.
    if ((link.expiresAt && link.expiresAt <= now) || (file.expiresAt && file.expiresAt <= now)) throw linkErrors.expired();
    await this.checkPassword(link.id, link.passwordHash, credentials);
    const budget = link.maxDownloads === undefined ? undefined : budgetOf(link.maxDownloads, file.size);
    if (budget !== undefined && link.bytesServed >= budget) throw linkErrors.exhausted(link.maxDownloads!);
    const ends = [link.expiresAt, file.expiresAt ?? undefined].filter((d): d is Date => d !== undefined);
    const expiresAt = ends.length ? new Date(Math.min(...ends.map((d) => d.getTime()))) : undefined;
    return { file, linkId: link.id, budget, maxDownloads: link.maxDownloads, expiresAt, hasPassword: link.passwordHash !== undefined };
  }

  /**
   * Whether `grant` (and `range` of it) is handed to the store rather than
   * served: only with offload on and a store that presigns, and only for the
   * whole file (no range, or one that covers it). A presigned URL is a
   * bearer credential for the whole object, to anyone, until it expires, so
   * never for what is less than that (issue 50):
   * - a link with max_downloads: its byte budget only a proxied body keeps exact;
   * - a link with a password: the URL would work without it;
   * - part of the file: the URL would give the whole, uncounted. A URL with
   *   the range signed into it would not do either: a browser's <video>
   *   sends its later ranges to the URL it was redirected to, and the
   *   store refuses a range its signature does not name.
   */
  offloads(grant: DownloadGrant, range?: ByteRange): boolean {
    if (this.offload === undefined || this.store.presignGet === undefined) return false;
    if (grant.budget !== undefined || grant.hasPassword) return false;
    return !range || (range.start === 0 && range.end === grant.file.size - 1);
  }

  /**
   * A presigned URL of the file, living S3_PRESIGN_SECONDS at most and never
   * past the link's (or file's) expiry; `disposition` is the header the
   * store is to answer with. A whole download is counted now, when it is
   * handed out (the store cannot tell us when it ends).
   */
  async handOut(grant: DownloadGrant, range: ByteRange | undefined, { disposition, audit }: { disposition: string; audit?: { address: string | null } }): Promise<string> {
    if (!this.offloads(grant, range)) throw new Error('handOut of a download that is not offloaded');
    const left = grant.expiresAt ? Math.floor((grant.expiresAt.getTime() - this.clock().getTime()) / 1000) : Infinity;
    const seconds = Math.max(1, Math.min(this.offload!.seconds, left));
    const url = await this.store.presignGet!(grant.file.storageKey, { seconds, disposition, contentType: 'application/octet-stream' });
    await this.links.countDownload(grant.linkId, grant.file.id, audit);
    return url;
  }

  /** The body of `grant`'s file, or of `range` of it; undefined when the link went since it was authorised. */
  /** `audit`: with AUDIT_DOWNLOADS, the client's address for the audit row its count writes. */
  async open(grant: DownloadGrant, range?: ByteRange, audit?: { address: string | null }): Promise<OpenedDownload | undefined> {
    const { file, linkId, budget } = grant;
    const length = range ? range.end - range.start + 1 : file.size;
    const charge = chargeOf(length);
    const whole = !range || (range.start === 0 && range.end === file.size - 1);
    if (budget !== undefined) {
      // A whole download may pass the budget by the slack: what clients that
      // stopped early took must not keep the real recipient out (issue 38).
      const reserved = await this.links.reserve(linkId, charge, whole ? budget + slackOf(file.size) : budget);
      if (reserved === 'gone') return undefined;
      if (reserved === 'exhausted') throw linkErrors.exhausted(grant.maxDownloads!);
    }
    const giveBack = (sent: number) => (budget === undefined ? Promise.resolve() : this.links.release(linkId, charge - sent));
    let body: Readable | PooledRead;
    try {
      body = await (this.store.getPooled ? this.store.getPooled(file.storageKey, range) : this.store.get(file.storageKey, range));
    } catch (err) {
      await giveBack(0).catch(() => {});
      throw err;
    }
    const tracked = this.live?.track(linkId, file.id);
    let settled = false;
    return {
      length,
      body,
      limited: budget !== undefined,
      revoked: tracked?.signal,
      settle: async (sent) => {
        if (settled) return;
        settled = true;
        tracked?.done();
        if (sent < length) return giveBack(sent);
        if (whole) await this.links.countDownload(linkId, file.id, audit);
      },
    };
  }

  private async checkPassword(linkId: string, hash: string | undefined, { password, guard, embedded }: DownloadCredentials): Promise<void> {
    if (!hash) return;
    // Before the password is read: neither a guess counted nor a prompt asked for over another site's page.
    if (embedded) throw linkErrors.embedded();
    if (password === undefined) throw linkErrors.passwordRequired();
    if (!(await guardedPasswordCheck(password, hash, linkId, guard))) throw linkErrors.wrongPassword();
  }
}
