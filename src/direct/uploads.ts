// Uploads straight to the store (issue 55): the client sends the parts to
// the store through URLs signed here, and the service keeps every rule an
// upload meets on the other transports. The intake's open runs before
// anything is signed (the plan's max_file_size against the declared size,
// a daily slot, a file request's place, and the whole declared size
// reserved against the storage quota); complete checks what the store holds
// against what was declared before the intake's finish makes it a file.
// Every way an upload ends without a file (abort, a mismatch, expiry) aborts
// the store's upload and then forgets its record, which gives back what it
// held; until the store confirms, the record stays for the sweep.
import { createHash } from 'node:crypto';
import type { Caller } from '../accounts/types.js';
import type { Actor } from '../audit/actor.js';
import type { FileRecord } from '../files/record.js';
import { UploadEnded } from '../files/errors.js';
import { UploadSweptError } from '../intake/finish.js';
import { linkRulesOf, type UploadOptions } from '../files/upload-options.js';
import type { Intake } from '../intake/intake.js';
import type { UploadLedger } from '../ledger/ledger.js';
import type { DirectStore, StoredPart } from '../storage/direct.js';
import { UploadGoneError } from '../storage/direct.js';
import { ObjectStoreError, type ObjectStore } from '../storage/object-store.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import { systemClock, type Clock } from '../clock.js';
import { directErrors } from './errors.js';
import { partLength, planParts, type PartPlan } from './part-plan.js';
import { DirectRecords, newDirectId, type DirectRow, type DirectScope } from './records.js';

export interface DirectUploadsOptions {
  prisma: PrismaClient;
  intake: Intake;
  ledger: UploadLedger;
  store: ObjectStore;
  /** DIRECT_UPLOAD_EXPIRY: seconds from creation to completion at most. */
  expirySeconds: number;
  /** The bucket's lifecycle rule for incomplete uploads, in seconds, if one is in force: no upload is promised longer. */
  storeLifetimeSeconds?: number;
  /** The cap of open direct uploads for a plan that sets no concurrent_uploads (ACCOUNT_UPLOAD_CONCURRENCY). */
  defaultConcurrency: number;
  onCleanupError: (err: unknown) => void;
  clock?: Clock;
}

/** What a client declares when it creates an upload. */
export interface NewDirectUpload {
  filename: string;
  size: number;
  partSize?: number;
  sha256?: string;
  options: UploadOptions;
}

/** A signed part URL. */
export interface PartUrl {
  partNumber: number;
  size: number;
  url: string;
}

export interface DirectView {
  row: DirectRow;
  plan: PartPlan;
  /** URLs of the parts asked for, and until when they work. */
  urls?: { parts: PartUrl[]; expiresAt: Date };
  /** The parts the store holds now (view()). */
  stored?: StoredPart[];
}

/** The part URLs a create answers with; the rest come from sign(). */
export const FIRST_URLS = 100;
/** The longest a part URL lives: an hour (never past the upload's expiry). */
const URL_SECONDS = 3600;
/** How long a complete, an abort or a sweep holds its claim at most: past the store calls' deadlines, so only a dead instance leaves one to lapse. */
const CLAIM_MS = 10 * 60_000;

/** ETags as S3 lists them are quoted; clients may send them either way. */
const bareEtag = (etag: string) => etag.replace(/^"|"$/g, '');

export class DirectUploads {
  readonly records: DirectRecords;
  private readonly clock: Clock;

  constructor(private readonly options: DirectUploadsOptions) {
    this.records = new DirectRecords(options.prisma, options.ledger);
    this.clock = options.clock ?? systemClock;
  }

  /** The store's side, or 404 direct_uploads_off when the server takes no direct uploads. */
  get store(): DirectStore {
    const direct = this.options.store.direct;
    if (!direct) throw directErrors.off();
    return direct;
  }

  /** What clients need to plan an upload (GET /uploads/direct). */
  describe() {
    return { limits: this.store.limits, urlSeconds: URL_SECONDS, expirySeconds: this.expirySeconds() };
  }

  private expirySeconds(): number {
    const { expirySeconds, storeLifetimeSeconds } = this.options;
    return storeLifetimeSeconds === undefined ? expirySeconds : Math.min(expirySeconds, storeLifetimeSeconds);
  }

  /**
   * Opens an upload of `input` for `caller` through the intake (every limit,
   * before anything is signed), starts the store's multipart upload and
   * signs the first parts' URLs. `deadline`: the latest it may expire (a
   * file request's REQUEST_UPLOAD_EXPIRY).
   */
  async create(caller: Caller, input: NewDirectUpload, scope: { requestId?: string; deadline?: Date } = {}): Promise<DirectView> {
    const store = this.store;
    const { intake, onCleanupError } = this.options;
    const plan = planParts(input.size, input.partSize, store.limits);
    const limit = caller.plan.concurrentUploads ?? this.options.defaultConcurrency;
    const counted = { accountId: caller.accountId, requestId: scope.requestId };
    // A cheap refusal first; the exact one follows the row (below).
    if ((await this.records.open(counted)) >= limit) throw directErrors.tooMany(limit);
    const now = this.clock();
    const rules = await linkRulesOf({ maxDownloads: input.options.maxDownloads, password: input.options.password }, now);
    const storageKey = await intake.open(caller, { size: input.size, requestId: scope.requestId, reserveAll: true });
    let uploadId: string;
    try {
      uploadId = await store.start(storageKey);
    } catch (err) {
      await intake.abandon(storageKey);
      throw err;
    }
    const expiresAt = new Date(Math.min(now.getTime() + this.expirySeconds() * 1000, scope.deadline?.getTime() ?? Infinity));
    const row: DirectRow = {
      id: newDirectId(),
      accountId: caller.accountId,
      storageKey,
      uploadId,
      filename: input.filename,
      size: input.size,
      partSize: plan.partSize,
      sha256: input.sha256,
      requestId: scope.requestId,
      fileExpiresIn: input.options.expiresIn,
      maxDownloads: rules.maxDownloads,
      passwordHash: rules.passwordHash,
      expiresAt,
      createdAt: now,
    };
    try {
      await this.records.create(row);
    } catch (err) {
      // The record is still the intake's (reason "upload"): abort the store's upload, then drop it.
      await this.options.store.discard(storageKey, uploadId).then(() => intake.abandon(storageKey), onCleanupError);
      throw err;
    }
    // Exact across instances: each create counts after its own row is in, so
    // of two racing for the last place at least one sees the other (both may
    // give way; neither can pass the limit).
    if ((await this.records.open(counted)) > limit) {
      await this.remove(row);
      throw directErrors.tooMany(limit);
    }
    const parts = Array.from({ length: Math.min(plan.parts, FIRST_URLS) }, (_, i) => i + 1);
    return { row, plan, urls: await this.signParts(row, plan, parts) };
  }

  /** URLs for `partNumbers` of upload `id`. */
  async sign(scope: DirectScope, id: string, partNumbers: readonly number[]): Promise<DirectView> {
    const row = await this.find(scope, id);
    const plan = planOf(row);
    const outside = partNumbers.find((n) => n < 1 || n > plan.parts);
    if (outside !== undefined) throw directErrors.invalid(`part ${outside} is outside the upload's parts 1 to ${plan.parts}`);
    return { row, plan, urls: await this.signParts(row, plan, partNumbers) };
  }

  /** The upload with the parts the store holds now: what a client resumes from. */
  async view(scope: DirectScope, id: string): Promise<DirectView> {
    const row = await this.find(scope, id);
    const stored = await this.store.parts(row.storageKey, row.uploadId).catch(async (err: unknown) => {
      // The store aborted it (its lifecycle rule, or an operator): nothing is left to resume.
      if (err instanceof UploadGoneError) await this.removeGone(row);
      throw err instanceof UploadGoneError ? directErrors.notFound() : err;
    });
    return { row, plan: planOf(row), stored };
  }

  /**
   * Completes upload `id` with the parts the client sent (`parts`, their
   * ETags in part order): checks what the store holds against the declared
   * size and part size and those ETags, completes the object, checks a
   * declared SHA-256 by reading it back, and makes it a file. Anything that
   * does not add up aborts the upload (422 direct_upload_mismatch).
   */
  async complete(scope: DirectScope, id: string, parts: readonly { partNumber: number; etag: string }[], actor?: Actor): Promise<FileRecord> {
    const row = await this.find(scope, id);
    const now = this.clock();
    const until = new Date(now.getTime() + CLAIM_MS);
    if (!(await this.records.claim(row.id, now, until))) throw directErrors.busy();
    let settled = false;
    // What does not add up is aborted before the answer says so; a store that
    // fails the abort answers 503, the upload left as it was for a retry (or the sweep).
    const refuse = async (why: string) => {
      settled = await this.remove(row);
      return settled ? directErrors.mismatch(why) : abortFailed();
    };
    try {
      await this.completeObject(row, parts, refuse);
      const sha256 = row.sha256;
      if (sha256 !== undefined && (await this.sha256Of(row.storageKey)) !== sha256) throw await refuse('the object\'s SHA-256 is not the declared sha256');
      try {
        const file = await this.options.intake.finish({
          accountId: row.accountId,
          filename: row.filename,
          size: row.size,
          sha256: sha256 ?? null,
          storageKey: row.storageKey,
          expiresIn: row.fileExpiresIn,
          primaryLink: { maxDownloads: row.maxDownloads, passwordHash: row.passwordHash },
          actor,
        });
        settled = true;
        return file;
      } catch (err) {
        // Its request ended meanwhile: no file, and the record stays (settled by the close) naming the object.
        if (err instanceof UploadEnded) settled = await this.remove(row);
        // The record was gone: only another complete takes a direct upload's record
        // (the sweep's record pass leaves them to their expiry), one whose claim
        // this complete outlived, so the object is that complete's file now and stays.
        if (err instanceof UploadSweptError) {
          settled = true;
          throw directErrors.notFound();
        }
        throw err;
      }
    } finally {
      if (!settled) await this.records.letGo(row.id, until).catch(this.options.onCleanupError);
    }
  }

  /** Aborts upload `id`: the store's upload, then the record with all it held. */
  async abort(scope: DirectScope, id: string): Promise<void> {
    const row = await this.find(scope, id);
    const now = this.clock();
    const until = new Date(now.getTime() + CLAIM_MS);
    if (!(await this.records.claim(row.id, now, until))) throw directErrors.busy();
    if (!(await this.remove(row))) {
      await this.records.letGo(row.id, until).catch(this.options.onCleanupError);
      throw abortFailed();
    }
  }

  /** The sweep's part: uploads past their expiry aborted, with all they held given back. */
  async sweepExpired(limit: number): Promise<{ removed: number; failed: number }> {
    const now = this.clock();
    const until = new Date(now.getTime() + CLAIM_MS);
    let removed = 0;
    let failed = 0;
    for (const row of await this.records.expired(now, limit)) {
      if (!(await this.records.claim(row.id, now, until))) continue;
      if (await this.remove(row)) removed += 1;
      else {
        failed += 1;
        await this.records.letGo(row.id, until).catch(this.options.onCleanupError);
      }
    }
    return { removed, failed };
  }

  private async find(scope: DirectScope, id: string): Promise<DirectRow> {
    // 404 rather than off first: an id means nothing on a server without them either.
    void this.store;
    const row = await this.records.find(scope, id, this.clock());
    if (!row) throw directErrors.notFound();
    return row;
  }

  private async signParts(row: DirectRow, plan: PartPlan, partNumbers: readonly number[]): Promise<{ parts: PartUrl[]; expiresAt: Date }> {
    const now = this.clock();
    const seconds = Math.max(1, Math.min(URL_SECONDS, Math.floor((row.expiresAt.getTime() - now.getTime()) / 1000)));
    const parts = await Promise.all(
      partNumbers.map(async (partNumber) => {
        const size = partLength(plan, partNumber);
        return { partNumber, size, url: await this.store.signPart(row.storageKey, row.uploadId, partNumber, size, seconds) };
      }),
    );
    return { parts, expiresAt: new Date(now.getTime() + seconds * 1000) };
  }

  /**
   * Lists the store's parts, checks them, and completes the object; a
   * complete retried after the store completed it (the file's statement
   * failed) finds the object instead of the upload and goes on from there.
   */
  private async completeObject(row: DirectRow, sent: readonly { partNumber: number; etag: string }[], refuse: (why: string) => Promise<Error>): Promise<void> {
    const store = this.store;
    let stored: StoredPart[];
    try {
      stored = await store.parts(row.storageKey, row.uploadId);
    } catch (err) {
      if (!(err instanceof UploadGoneError)) throw err;
      const object = await this.options.store.head(row.storageKey);
      if (object?.size === row.size) return;
      throw await refuse('the store no longer has the upload (aborted, or expired by the bucket\'s lifecycle rule)');
    }
    const why = mismatch(planOf(row), stored, sent);
    if (why) throw await refuse(why);
    await store.complete(row.storageKey, row.uploadId, stored);
  }

  private async sha256Of(storageKey: string): Promise<string> {
    const hash = createHash('sha256');
    for await (const chunk of await this.options.store.get(storageKey)) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  /**
   * Ends an upload that will not become a file: the store's upload aborted
   * and any object removed, then the record forgotten with its slot,
   * reservation and place (its row goes with it). False when the store
   * failed: the record stays, and the sweep tries again at its expiry.
   */
  private async remove(row: DirectRow): Promise<boolean> {
    try {
      await this.options.store.discard(row.storageKey, row.uploadId);
    } catch (err) {
      this.options.onCleanupError(err);
      return false;
    }
    await this.options.ledger.forgetDirect(row.storageKey);
    return true;
  }

  private async removeGone(row: DirectRow): Promise<void> {
    const now = this.clock();
    const until = new Date(now.getTime() + CLAIM_MS);
    if (await this.records.claim(row.id, now, until)) {
      if (!(await this.remove(row))) await this.records.letGo(row.id, until).catch(this.options.onCleanupError);
    }
  }
}

/** The store failed the abort (503 store_unavailable): the upload stays, as it was, for a retry or the sweep at its expiry. */
const abortFailed = () => new ObjectStoreError('aborting the upload in the store failed');

const planOf = (row: DirectRow): PartPlan => ({ size: row.size, partSize: row.partSize, parts: Math.ceil(row.size / row.partSize) });

/** What does not add up between the declared upload, the store's parts and the client's; undefined when all does. */
export function mismatch(plan: PartPlan, stored: readonly StoredPart[], sent: readonly { partNumber: number; etag: string }[]): string | undefined {
  const total = stored.reduce((sum, p) => sum + p.size, 0);
  if (stored.length !== plan.parts || total !== plan.size) {
    return `the store holds ${stored.length} parts of ${total} bytes in all, not the declared ${plan.parts} parts of ${plan.size} bytes`;
  }
  for (const [i, part] of stored.entries()) {
    if (part.partNumber !== i + 1) return `part ${i + 1} is missing from the store`;
    if (part.size !== partLength(plan, i + 1)) return `part ${i + 1} holds ${part.size} bytes, not ${partLength(plan, i + 1)}`;
  }
  if (sent.length !== stored.length) return `${sent.length} parts were sent, not ${stored.length}`;
  for (const [i, part] of sent.entries()) {
    if (part.partNumber !== i + 1 || bareEtag(part.etag) !== bareEtag(stored[i]!.etag)) return `part ${i + 1}'s ETag is not the store's`;
  }
  return undefined;
}

