import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ADMIN_TOKEN_MIN } from './config.js';
import { makeDir } from './make-dir.js';
import { StartupError } from './startup-error.js';

export const adminTokenPath = (dataDir: string) => join(dataDir, 'admin-token');

/** A token file written by hand is held to ADMIN_TOKEN's minimum too (config.ts checks the variable). */
function longEnough(token: string, path: string): string {
  if (token.length >= ADMIN_TOKEN_MIN) return token;
  throw new StartupError(`${path} holds an admin token of ${token.length} characters; it must have at least ${ADMIN_TOKEN_MIN}: remove the file (a new token is generated) or write a longer one`);
}

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
  if (existing?.trim()) return longEnough(existing.trim(), path);
  // Hex, not base64url: one token in 64 began with '-', which a command line
  // (`dropstream loadtest --admin-token T`, Node's parseArgs) takes for an option.
  const token = randomBytes(32).toString('hex');
  await makeDir(dataDir);
  // 'wx' refuses to overwrite a token another process wrote meanwhile.
  try {
    await writeFile(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
    return token;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  // Replicas sharing DATA_DIR (compose --scale) start together: the first to
  // create the file wins and its token is everyone's. It writes the token
  // just after creating the file, so read until it is there.
  for (let tries = 0; tries < 100; tries++) {
    const winner = (await readFile(path, 'utf8')).trim();
    if (winner) return longEnough(winner, path);
    await sleep(10);
  }
  throw new Error(`${path} exists but stays empty: remove it, or set ADMIN_TOKEN`);
}
