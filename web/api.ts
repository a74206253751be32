// The page's only way to the server: same-origin fetches under /api/v1 with
// the key as `Authorization: Bearer`. An error answer becomes an ApiError
// carrying the API's own words (and, for 429, how long to wait).
export const API = '/api/v1';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The API's message for a failed answer: its `error.message`, plus the wait a 429 names. */
export function describeFailure(status: number, body: string, retryAfter: string | null): ApiError {
  let code = 'http_error';
  let message = `The server answered ${status}`;
  try {
    const parsed = JSON.parse(body) as { error?: { code?: string; message?: string } };
    if (parsed.error?.message) message = parsed.error.message;
    if (parsed.error?.code) code = parsed.error.code;
  } catch {
    // Not JSON (a proxy's page): the status alone.
  }
  if (status === 429 && retryAfter) message += ` (try again in ${retryAfter} s)`;
  return new ApiError(status, code, `${status}: ${message}`);
}

export class Api {
  constructor(private readonly key: string) {}

  get authorization(): string {
    return `Bearer ${this.key}`;
  }

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(API + path, {
      method,
      headers: { Authorization: this.authorization, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      // Every wait has a deadline.
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    if (!res.ok) throw describeFailure(res.status, text, res.headers.get('Retry-After'));
    return JSON.parse(text) as T;
  }
}

export interface FileItem {
  file_id: number;
  filename: string;
  size: number;
  upload_date: string;
  download_count: number;
  public_link: string;
  expires_at: string | null;
}

export interface FilePage {
  files: FileItem[];
  pagination: { page: number; limit: number; total: number; pages: number };
}

export interface LinkItem {
  link_id: string;
  public_link: string;
  primary: boolean;
  expires_at: string | null;
  max_downloads: number | null;
  download_count: number;
  password_protected: boolean;
}

export interface Stats {
  stats: { total_files: number; total_size: number };
  limits: { max_file_size: number | null; daily_uploads: number | null; concurrent_uploads: number | null; max_total_size: number | null; max_expires_in: number | null };
  plan: string;
}
