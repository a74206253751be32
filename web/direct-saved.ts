// Which upload straight to the store a file went into, kept in localStorage
// until the upload completes or the file is removed, so the same file
// chosen again after a reload goes on with it, as tus-js-client does with
// its upload URLs. Keyed by the uploads' endpoint (the account's, or a
// request link's) and the file's fingerprint: name, type, size and
// modification time. Only the upload's id is kept; the service asks for the
// key (or the link) as for every other request.
const PREFIX = 'dropstream.direct:';

export function fingerprint(endpoint: string, file: { name?: string; type?: string; size: number; lastModified?: number }): string {
  return `${PREFIX}${endpoint}|${file.name ?? ''}|${file.type ?? ''}|${file.size}|${file.lastModified ?? 0}`;
}

// A storage that refuses (private mode, full, disabled) only costs the resumption.
export const savedUploads = {
  get(key: string): string | undefined {
    try {
      return localStorage.getItem(key) ?? undefined;
    } catch {
      return undefined;
    }
  },
  set(key: string, id: string): void {
    try {
      localStorage.setItem(key, id);
    } catch {
      // See above.
    }
  },
  drop(key: string): void {
    try {
      localStorage.removeItem(key);
    } catch {
      // See above.
    }
  },
};
