import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export const adminTokenPath = (dataDir: string) => join(dataDir, 'admin-token');

/**
 * The admin token: ADMIN_TOKEN when set, else the one this installation
 * generated at its first start, kept in DATA_DIR/admin-token (mode 0600) so
 * the CLI on the same machine can read it.
 */
export async function resolveAdminToken(configured: string | undefined, dataDir: string): Promise<string> {
  if (configured) return configured;
  const path = adminTokenPath(dataDir);
  const existing = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (existing?.trim()) return existing.trim();
  const token = randomBytes(32).toString('base64url');
  await mkdir(dataDir, { recursive: true });
  // 'wx' refuses to overwrite a token another process wrote meanwhile.
  await writeFile(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
  return token;
}
