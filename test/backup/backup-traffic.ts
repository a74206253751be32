// Shared by the backup tests (test/backup/): a client that uploads and
// deletes while a backup is taken, remembering for each file when its upload
// was answered and when its delete was sent relative to the backup's steps;
// and what a restored server holds against what its store holds.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { PrismaClient } from '../../src/generated/prisma/client.js';
import { call, uploadFile } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { sha256 } from '../upgrade/fleet.js';

/** Where the backup was when something happened: before it began, while it ran, after it ended. */
export type Phase = 'before' | 'during' | 'after';

export interface Sent {
  id: number;
  name: string;
  sha256: string;
  size: number;
  link: string;
  /** Its object's key, as the live database names it. */
  storageKey: string;
  /** When its upload was answered 201. */
  uploaded: Phase;
  /** When its delete was sent, if it was. */
  deleted?: Phase;
}

export class BackupTraffic {
  phase: Phase = 'before';
  readonly files = new Map<number, Sent>();
  readonly unexpected: string[] = [];
  private stopping = false;
  private loop?: Promise<void>;
  private n = 0;

  constructor(
    private readonly baseUrl: () => string,
    private readonly key: string,
    /** The live server's database, for each file's storage key. */
    private readonly prisma: () => PrismaClient,
  ) {}

  async upload(size: number): Promise<Sent | undefined> {
    const name = `backup-${this.n++}.bin`;
    const data = randomBytes(size);
    const res = await uploadFile(this.baseUrl(), this.key, name, data);
    if (res.status !== 201) {
      this.unexpected.push(`upload ${name}: ${res.status} ${res.text.slice(0, 200)}`);
      return undefined;
    }
    const uploaded = this.phase;
    const [row] = await this.prisma().$queryRawUnsafe<{ storage_key: string }[]>('SELECT storage_key FROM files WHERE id = $1', res.body.file_id);
    const sent = { id: res.body.file_id, name, sha256: sha256(data), size, link: res.body.public_link, storageKey: row!.storage_key, uploaded };
    this.files.set(sent.id, sent);
    return sent;
  }

  async delete(file: Sent): Promise<void> {
    file.deleted = this.phase;
    const res = await call(`${this.baseUrl()}/api/v1/files/${file.id}`, { method: 'DELETE', key: this.key }).catch((err: unknown) => {
      // Refused: never sent, so never deleted.
      file.deleted = undefined;
      throw err;
    });
    if (res.status !== 200) this.unexpected.push(`delete ${file.name}: ${res.status} ${res.text.slice(0, 200)}`);
  }

  /** Uploads (and every third step deletes one of its files) until stop(); one request at a time. */
  start(): void {
    this.loop = (async () => {
      for (let step = 0; !this.stopping; step++) {
        try {
          const live = [...this.files.values()].filter((f) => !f.deleted);
          if (step % 3 === 2 && live.length > 5) await this.delete(live[step % live.length]!);
          else await this.upload(step % 11 === 0 ? 6 * 1024 * 1024 + step : 1000 + ((step * 7919) % 200_000));
        } catch (err) {
          // A server that stopped taking connections (the embedded backup stops it): the loop ends there.
          if (this.stopOnRefusal && /ECONNREFUSED|fetch failed/.test(String((err as Error).cause ?? err))) return;
          this.unexpected.push(`step ${step}: ${(err as Error).message}`);
        }
      }
    })();
  }

  /** For the embedded backup, whose server stops under the traffic: a refused connection ends it quietly. */
  stopOnRefusal = false;

  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
  }
}

export interface RestoreReport {
  /** Rows of files whose object the restored store lacks. */
  rowsWithoutObjects: number[];
  /** Objects the restored store holds that no file row names. */
  objectsWithoutRows: string[];
  /** Upload-ledger records the backup caught: uploads in flight, deletes not yet done, tus uploads begun. */
  pending: { storage_key: string; reason: string }[];
}

/** What the restored database says against what the restored store holds (`keys`). */
export async function restoreReport(prisma: PrismaClient, keys: string[]): Promise<RestoreReport & { rows: { id: number; storage_key: string; sha256: string }[] }> {
  const rows = await prisma.$queryRawUnsafe<{ id: number; storage_key: string; sha256: string }[]>('SELECT id, storage_key, sha256 FROM files');
  const pending = await prisma.$queryRawUnsafe<{ storage_key: string; reason: string }[]>('SELECT storage_key, reason FROM pending_objects ORDER BY storage_key');
  const held = new Set(keys);
  const named = new Set(rows.map((r) => r.storage_key));
  return {
    rows,
    rowsWithoutObjects: rows.filter((r) => !held.has(r.storage_key)).map((r) => r.id),
    objectsWithoutRows: keys.filter((k) => !named.has(k)),
    pending,
  };
}

/**
 * The restore keeps what the backup promised: every file whose upload was
 * answered before the backup began and that was not deleted by then is a row;
 * every row either downloads from the restored server with the SHA-256 it
 * was sent with, or is a file deleted while the backup ran (its object went
 * before the copy reached it); objects without rows are uploads answered
 * after the backup began. /stats agrees with the rows.
 */
export async function expectRestored(restored: TestServer, key: string, traffic: BackupTraffic, report: RestoreReport & { rows: { id: number; sha256: string }[] }): Promise<void> {
  const rowIds = new Set(report.rows.map((r) => r.id));
  // A file deleted while the backup ran may or may not be in it; one deleted after it ended must be.
  const promised = [...traffic.files.values()].filter((f) => f.uploaded === 'before' && (f.deleted === undefined || f.deleted === 'after'));
  expect(promised.length, 'files the backup must hold').to.be.greaterThan(5);
  expect(promised.filter((f) => !rowIds.has(f.id)).map((f) => f.name), 'files acknowledged before the backup began, missing from the restore').to.deep.equal([]);
  const goneBefore = [...traffic.files.values()].filter((f) => f.deleted === 'before').map((f) => f.id);
  expect(goneBefore.filter((id) => rowIds.has(id)), 'files deleted before the backup began, back in the restore').to.deep.equal([]);
  const byKey = new Map([...traffic.files.values()].map((f) => [f.storageKey, f]));
  // An upload that committed after the dump's snapshot, or a file whose row went before it and whose object went only after the copy listed it.
  const unexplainedObjects = report.objectsWithoutRows.filter((k) => !byKey.has(k) || (byKey.get(k)!.uploaded === 'before' && byKey.get(k)!.deleted !== 'during'));
  expect(unexplainedObjects, 'objects without rows that are neither uploads answered after the backup began nor files deleted while it ran').to.deep.equal([]);
  const unexplainedRows = report.rowsWithoutObjects.filter((id) => traffic.files.get(id)?.deleted !== 'during');
  expect(unexplainedRows, 'rows without objects that are not files deleted while the backup ran').to.deep.equal([]);
  for (const row of report.rows) {
    if (report.rowsWithoutObjects.includes(row.id)) {
      const res = await fetch(restored.url(traffic.files.get(row.id)!.link));
      expect(res.status, 'a file deleted while the backup ran: its restored link').to.equal(404);
      continue;
    }
    const sent = traffic.files.get(row.id)!;
    expect(sent, `row ${row.id} is a file the test uploaded`).to.not.equal(undefined);
    expect(row.sha256, `the restored row's SHA-256 of ${sent.name}`).to.equal(sent.sha256);
    const res = await fetch(restored.url(sent.link));
    expect(res.status, `download of ${sent.name} from the restore`).to.equal(200);
    expect(sha256(Buffer.from(await res.arrayBuffer())), `SHA-256 of ${sent.name} downloaded from the restore`).to.equal(sent.sha256);
  }
  const stats = await call(restored.url('/api/v1/stats'), { key });
  const sizes = report.rows.map((r) => traffic.files.get(r.id)?.size ?? 0);
  expect(stats.body.stats).to.deep.include({ total_files: report.rows.length, total_size: sizes.reduce((a, b) => a + b, 0) });
}
