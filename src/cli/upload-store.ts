// Where `dropstream upload` remembers its resumable uploads between runs, so
// that one cut short (Ctrl-C, a network gone for longer than the retries)
// continues when the same command runs again: tus-js-client's UrlStorage
// interface, kept in one JSON file in the user's cache folder
// ($XDG_CACHE_HOME/dropstream, else ~/.cache/dropstream).
//
// Not tus-js-client's own FileUrlStorage: it stores each upload's metadata,
// and ours carries the link's password. Here only the upload's URL, size and
// time are kept; the API key never is (the URL alone opens nothing).
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { PreviousUpload, UrlStorage } from 'tus-js-client';

/** Forgotten after this long: the server has long expired an upload left that long (RESUMABLE_EXPIRY is hours). */
const KEEP_MS = 7 * 24 * 3600 * 1000;

export const cacheDir = (env: NodeJS.ProcessEnv) => join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'dropstream');

type Entries = Record<string, PreviousUpload>;

/**
 * Which way the remembered upload went: tus (its URL is the tus upload's) or
 * straight to the store (its URL is the direct upload's, direct-upload.ts).
 * One file holds both; the kind leads each key, so neither sees the other's.
 */
export type UploadKind = 'tus' | 'direct';

/**
 * What makes two runs "the same command": the server's upload endpoint, the
 * file (absolute path, size, modification time: a file changed since is a
 * new upload) and the link's rules (a run with other rules is another
 * upload; they are hashed, so no password is written down).
 */
export async function uploadFingerprint(endpoint: URL, path: string, rules: Record<string, string>): Promise<string> {
  const info = await stat(path);
  const rulesHash = createHash('sha256').update(JSON.stringify(Object.entries(rules).sort())).digest('hex').slice(0, 16);
  return ['dropstream', endpoint.href, resolve(path), info.size, info.mtimeMs, rulesHash].join(' ');
}

/**
 * The store. Writes go to a temporary file renamed into place, so a reader
 * never sees half a file; two runs writing at once can lose one entry (that
 * upload then starts over), which is not worth a lock.
 */
export function uploadStore(env: NodeJS.ProcessEnv, warn: (line: string) => void, kind: UploadKind = 'tus'): UrlStorage & { path: string } {
  const dir = cacheDir(env);
  const path = join(dir, 'uploads.json');

  async function load(): Promise<Entries> {
    const text = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? '{}' : Promise.reject(err)));
    try {
      const parsed: unknown = JSON.parse(text);
      return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Entries) : {};
    } catch {
      // A damaged file costs the resumes it held, not the upload.
      return {};
    }
  }

  async function save(entries: Entries): Promise<void> {
    const cutoff = Date.now() - KEEP_MS;
    const kept = Object.fromEntries(Object.entries(entries).filter(([, entry]) => Date.parse(entry.creationTime) > cutoff));
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const temp = `${path}.${randomBytes(6).toString('hex')}`;
    await writeFile(temp, `${JSON.stringify(kept, null, 1)}\n`, { mode: 0o600 });
    await rename(temp, path);
  }

  // The store is a convenience: one that cannot be read or written (a
  // read-only home, a full disk) costs resuming, never the upload, and is
  // said once.
  let warned = false;
  const unusable = (err: unknown) => {
    if (warned) return;
    warned = true;
    warn(`dropstream: warning: cannot use ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); this upload cannot be resumed by a later run`);
  };

  const matching = async (prefix: string) =>
    Object.entries(await load().catch((err: unknown) => (unusable(err), {} as Entries)))
      .filter(([key]) => key.startsWith(prefix))
      .map(([key, entry]) => ({ ...entry, urlStorageKey: key }));

  return {
    path,
    findAllUploads: () => matching(`${kind}::`),
    findUploadsByFingerprint: (fingerprint) => matching(`${kind}::${fingerprint}::`),
    async removeUpload(key) {
      try {
        const entries = await load();
        if (!(key in entries)) return;
        delete entries[key];
        await save(entries);
      } catch (err) {
        unusable(err);
      }
    },
    async addUpload(fingerprint, upload) {
      const key = `${kind}::${fingerprint}::${randomBytes(6).toString('hex')}`;
      try {
        const entries = await load();
        // Metadata stays out: it holds the password (and the server keeps it anyway).
        entries[key] = { size: upload.size, metadata: {}, creationTime: upload.creationTime, uploadUrl: upload.uploadUrl, urlStorageKey: key, parallelUploadUrls: null };
        await save(entries);
      } catch (err) {
        unusable(err);
      }
      return key;
    },
  };
}
