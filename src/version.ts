// What this build is: package.json's version, the one place a release writes
// it, and the commit dist/ was built from, which scripts/build.mjs records in
// dist/build-info.json ("unknown" when the build had no git: a Docker build
// without the REVISION argument, a copy made by `git archive`). The CLI's
// --version, /healthz, /metrics and the start-up line all read it here.
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  /** package.json's version, e.g. `0.1.0`. */
  version: string;
  /** The commit the build was made from (12 hex digits, `-dirty` when its sources had uncommitted changes), or `unknown`. */
  commit: string;
}

// src/version.ts and dist/version.js both sit one folder below the package's root.
const root = new URL('../', import.meta.url);

function readJson(path: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(new URL(path, root), 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

let cached: BuildInfo | undefined;

/** Read once per process: neither changes while it runs. */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  const version = readJson('package.json')?.version;
  const commit = readJson('dist/build-info.json')?.commit;
  cached = {
    version: typeof version === 'string' ? version : 'unknown',
    commit: typeof commit === 'string' && commit ? commit : 'unknown',
  };
  return cached;
}
