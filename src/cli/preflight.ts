// Checks `dropstream serve` makes before it touches the database, so that a
// mistake is one line and nothing has been migrated yet.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { StartupError } from '../startup-error.js';

/**
 * Fails with one line naming the variable and the address when a port is
 * taken (or not ours to bind). The listeners open only after migrations,
 * which can take seconds; a port taken meanwhile still fails at listen.
 */
export async function checkPortsFree(ports: { variable: string; host: string; port: number }[]): Promise<void> {
  for (const { variable, host, port } of ports) {
    if (port === 0) continue;
    const probe = createServer();
    await new Promise<void>((resolve, reject) => {
      probe.once('error', (err: NodeJS.ErrnoException) => {
        const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
        if (err.code === 'EADDRINUSE') reject(new StartupError(`${variable}: ${address} is already in use by another process; stop it or set ${variable} to a free port`));
        else if (err.code === 'EACCES') reject(new StartupError(`${variable}: ${address} may not be bound by this process (EACCES; ports below 1024 need privileges); set ${variable} to a port from 1024`));
        else if (err.code === 'EADDRNOTAVAIL') reject(new StartupError(`${variable}: ${address} is not an address of this machine (EADDRNOTAVAIL)`));
        else reject(err);
      });
      probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
    });
  }
}

/** package.json's `engines.node` as its lowest major version (">=22" -> 22). */
function lowestSupportedMajor(): { range: string; major: number } | undefined {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines?: { node?: string } };
  const range = manifest.engines?.node;
  const major = /^\s*>=\s*(\d+)/.exec(range ?? '')?.[1];
  return range && major ? { range, major: Number(major) } : undefined;
}

/** A warning to print when this Node is older than `engines` allows; undefined otherwise. */
export function nodeVersionWarning(version = process.version): string | undefined {
  const supported = lowestSupportedMajor();
  const major = Number(/^v?(\d+)/.exec(version)?.[1]);
  if (!supported || !(major < supported.major)) return undefined;
  return `Node ${version} is not supported (package.json engines: node ${supported.range}); use Node 24 LTS`;
}
