// The links component as the routes see it: a file's links (list, create,
// revoke) and downloads through them (download.ts). Built once by the
// composition root.
import type { Actor } from '../audit/actor.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { DownloadEventLimits } from '../webhooks/events.js';
import { Downloads, type OffloadOptions } from './download.js';
import { linkErrors } from './errors.js';
import { FileLinks, type LinkRecord, type LinkRules, type Revocation } from './links.js';
import type { LiveDownloads } from './live-downloads.js';
import { systemClock, type Clock } from '../clock.js';

export interface LinkServiceOptions {
  prisma: PrismaClient;
  store: ObjectStore;
  /** Downloads in flight, ended when their link is revoked or their file deleted (on every instance). */
  live?: LiveDownloads;
  /** S3_PRESIGNED_DOWNLOADS: unlimited links' downloads handed to the store. */
  offload?: OffloadOptions;
  /** WEBHOOK_PENDING_DOWNLOADS, and the count of file.downloaded messages dropped at it. */
  downloadEvents?: DownloadEventLimits;
  /** The time links expire and are made by (the composition root's clock). */
  clock?: Clock;
}

const LINK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export class LinkService {
  /** The links table (links.ts). */
  readonly links: FileLinks;
  /** Downloads through links: authorise, then open or hand out. */
  readonly downloads: Downloads;
  /** The time now, as links read it: a new link's expires_in counts from it. */
  readonly clock: Clock;

  constructor(private readonly options: LinkServiceOptions) {
    this.clock = options.clock ?? systemClock;
    this.links = new FileLinks(options.prisma, options.downloadEvents, this.clock);
    this.downloads = new Downloads(this.links, options.store, this.clock, options.live, options.offload);
  }

  /** The links of the account's file, the primary first; undefined for no such file (the route's 404 file_not_found). */
  list(accountId: number, fileId: number): Promise<LinkRecord[] | undefined> {
    return this.links.list(accountId, fileId);
  }

  /** A new link to the account's file with `rules` (the password already hashed: upload-options.ts's linkRulesOf); undefined for no such file. */
  create(accountId: number, fileId: number, rules: LinkRules, now = this.clock(), actor?: Actor): Promise<LinkRecord | undefined> {
    return this.links.create(accountId, fileId, rules, now, actor);
  }

  /**
   * Revokes a link of the account's file: its URL answers 404 at once, on
   * every instance (links are read from the database on every download,
   * never cached). Revoking the primary link rotates it (links.ts).
   */
  async revoke(accountId: number, fileId: number, linkId: string, actor?: Actor): Promise<Revocation> {
    // Link ids are UUIDs; anything else names no link, and is not worth a query.
    const outcome = LINK_ID.test(linkId) ? await this.links.revoke(accountId, fileId, linkId, this.clock(), actor) : undefined;
    if (!outcome) throw linkErrors.notFound();
    // Its downloads in flight end too, on every instance (live-downloads.ts).
    await this.options.live?.announce({ link: linkId });
    return outcome;
  }
}
