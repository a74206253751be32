// The service's side of an upload straight to the store
// (docs/direct-uploads.md): the small JSON requests around the parts, under
// /api/v1/uploads/direct with the key, or /r/{token}/uploads/direct through
// a file request's link (no key: the browser sends a request's password
// itself). Every refusal becomes an ApiError in the API's words.
import { describeFailure } from './api.js';

/** A part's URL as the service signed it: for exactly `size` bytes. */
export interface PartUrl {
  part_number: number;
  size: number;
  url: string;
}

export interface DirectUpload {
  upload_id: string;
  size: number;
  part_size: number;
  parts: number;
  /** On creation only: the URLs of the first 100 parts. */
  part_urls?: PartUrl[];
  url_expires_at?: string;
}

export interface StoredPart {
  part_number: number;
  size: number;
  etag: string;
}

export interface UploadedFile {
  file_id?: number;
  public_link?: string;
  size: number;
  filename: string;
}

/** The most part numbers one POST .../parts may ask for. */
export const URLS_PER_REQUEST = 100;

/** A wire date ("2026-11-29 22:00:00", UTC) as milliseconds. */
export const wireTime = (date: string) => Date.parse(`${date.replace(' ', 'T')}Z`);

export class DirectApi {
  /** `endpoint`: the uploads' base (/api/v1/uploads or /r/{token}/uploads); `headers`: the key's Authorization, if any. */
  constructor(
    private readonly endpoint: string,
    private readonly headers: Record<string, string> = {},
  ) {}

  /** 200: the service takes uploads straight to the store; a 404 (direct_uploads_off) or any failure: it does not. */
  async offered(): Promise<boolean> {
    try {
      const res = await fetch(`${this.endpoint}/direct`, { headers: this.headers, signal: AbortSignal.timeout(10_000) });
      return res.ok;
    } catch {
      return false;
    }
  }

  create(file: { name: string; size: number }, signal: AbortSignal): Promise<DirectUpload> {
    return this.call('POST', '', { filename: file.name, size: file.size }, signal);
  }

  /** Fresh URLs for `partNumbers` (at most URLS_PER_REQUEST). */
  sign(id: string, partNumbers: number[], signal: AbortSignal): Promise<{ part_urls: PartUrl[]; url_expires_at: string }> {
    return this.call('POST', `/${encodeURIComponent(id)}/parts`, { part_numbers: partNumbers }, signal);
  }

  /** The upload with the parts the store holds now (read from the store). */
  status(id: string, signal: AbortSignal): Promise<DirectUpload & { parts_stored: StoredPart[] }> {
    return this.call('GET', `/${encodeURIComponent(id)}`, undefined, signal);
  }

  complete(id: string, parts: { part_number: number; etag: string }[], signal: AbortSignal): Promise<UploadedFile> {
    return this.call('POST', `/${encodeURIComponent(id)}/complete`, { parts }, signal);
  }

  /** Gives back what the upload held; the page does not wait for it. */
  async abort(id: string): Promise<void> {
    await this.call('DELETE', `/${encodeURIComponent(id)}`, undefined, AbortSignal.timeout(30_000));
  }

  private async call<T>(method: string, path: string, body: unknown, signal: AbortSignal): Promise<T> {
    const res = await fetch(`${this.endpoint}/direct${path}`, {
      method,
      headers: { ...this.headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      // Every wait has a deadline; the upload's own signal stops it sooner (pause, removal).
      signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]),
    });
    const text = await res.text();
    if (!res.ok) throw describeFailure(res.status, text, res.headers.get('Retry-After'));
    return (text ? JSON.parse(text) : undefined) as T;
  }
}
