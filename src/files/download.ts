// A download through a public link, from its token to what to count when
// the response ends. The link's rules are checked here, in this order:
// known (404), neither it nor its file expired (410), password (401),
// budget (410); a limited
// link's bytes are reserved before any body is opened, so HTTP (the
// download route) only parses headers and writes the response.
import type { Readable } from 'node:stream';
import type { ByteRange, ObjectStore } from '../storage/object-store.js';
import { linkErrors } from './errors.js';
import { verifiedLately, verifyPassword } from './link-password.js';
import { budgetOf, chargeOf, slackOf, type FileLinks, type ResolvedLink } from './links.js';
import type { LiveDownloads } from './live-downloads.js';
import type { FileRecord } from './record.js';

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

export interface DownloadCredentials {
  /** The password the request carries, if any. */
  password?: string;
  /** Without it, guessing is bounded by nothing but scrypt's queue. */
  guard?: PasswordGuard;
}

/** What to send, chosen once the file is known: a range, the whole file (no range), or no body at all (undefined: HEAD, 304). */
export type BodyChoice = { range?: ByteRange } | undefined;

export interface OpenedDownload {
  file: FileRecord;
  /** The range served; absent for the whole file. */
  range?: ByteRange;
  /** Bytes of the body (of the range, or the file). */
  length: number;
  /** The bytes; absent when no body was chosen. */
  body?: Readable;
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

const nothing = async () => {};

export class Downloads {
  constructor(
    private readonly links: FileLinks,
    private readonly store: ObjectStore,
    private readonly clock: () => Date = () => new Date(),
    /** The registry that ends downloads of revoked links; absent: they run to their end. */
    private readonly live?: LiveDownloads,
  ) {}

  /** The download of `token`; undefined for no such link (the caller counts the guess). */
  async open(token: string, choose: (file: FileRecord) => BodyChoice, credentials: DownloadCredentials = {}): Promise<OpenedDownload | undefined> {
    const resolved = await this.links.resolve(token);
    if (!resolved) return undefined;
    const { link, file } = resolved;
    const now = this.clock();
    // The file's expiry ends every link to it, until the sweeper deletes it.
    if ((link.expiresAt && link.expiresAt <= now) || (file.expiresAt && file.expiresAt <= now)) throw linkErrors.expired();
    await this.checkPassword(resolved, credentials);
    const budget = link.maxDownloads === undefined ? undefined : budgetOf(link.maxDownloads, file.size);
    if (budget !== undefined && link.bytesServed >= budget) throw linkErrors.exhausted(link.maxDownloads!);

    const choice = choose(file);
    const range = choice?.range;
    const length = range ? range.end - range.start + 1 : file.size;
    if (!choice) return { file, range, length, limited: budget !== undefined, settle: nothing };

    const charge = chargeOf(length);
    const whole = !range || (range.start === 0 && range.end === file.size - 1);
    if (budget !== undefined) {
      // A whole download may pass the budget by the slack: what clients that
      // stopped early took must not keep the real recipient out (issue 38).
      const reserved = await this.links.reserve(link.id, charge, whole ? budget + slackOf(file.size) : budget);
      if (reserved === 'gone') return undefined;
      if (reserved === 'exhausted') throw linkErrors.exhausted(link.maxDownloads!);
    }
    const giveBack = (sent: number) => (budget === undefined ? Promise.resolve() : this.links.release(link.id, charge - sent));
    let body: Readable;
    try {
      body = await this.store.get(file.storageKey, range);
    } catch (err) {
      await giveBack(0).catch(() => {});
      throw err;
    }
    const tracked = this.live?.track(link.id, file.id);
    let settled = false;
    return {
      file,
      range,
      length,
      body,
      limited: budget !== undefined,
      revoked: tracked?.signal,
      settle: async (sent) => {
        if (settled) return;
        settled = true;
        tracked?.done();
        if (sent < length) return giveBack(sent);
        if (whole) await this.links.countDownload(link.id, file.id);
      },
    };
  }

  private async checkPassword({ link }: ResolvedLink, { password, guard }: DownloadCredentials): Promise<void> {
    if (!link.passwordHash) return;
    if (password === undefined) throw linkErrors.passwordRequired();
    if (verifiedLately(password, link.passwordHash)) return guard?.check(link.id);
    const settle = (await guard?.reserve(link.id)) ?? nothing;
    let outcome: GuessOutcome = 'unchecked';
    try {
      outcome = (await verifyPassword(password, link.passwordHash)) ? 'right' : 'wrong';
    } finally {
      await settle(outcome);
    }
    if (outcome === 'wrong') throw linkErrors.wrongPassword();
  }
}
