import type { Caller } from '../accounts/types.js';
import type { Intake } from '../intake/intake.js';
import { Upload } from './upload.js';

export interface PlainUploadsOptions {
  /** Where every upload opens and becomes a file (src/intake), built once by the composition root. */
  intake: Intake;
  /** Errors of clean-up work that must not fail the request (touching a record). */
  onCleanupError: (err: unknown) => void;
  /** How often a streaming upload touches its pending record; a minute unless a test wants it sooner. */
  heartbeatMs?: number;
}

/** Plain uploads (multipart): one Upload per request, the bytes of an upload the intake opened. */
export class PlainUploads {
  constructor(private readonly options: PlainUploadsOptions) {}

  /**
   * Opens an upload for `caller` (the intake's rules: a daily slot, 403 when
   * none is left; `requestId`'s place, before a byte of the body is read)
   * and returns it to feed.
   */
  async start(caller: Caller, requestId?: string): Promise<Upload> {
    const { intake, onCleanupError, heartbeatMs } = this.options;
    const key = await intake.open(caller, { requestId });
    return new Upload(intake, key, caller, onCleanupError, heartbeatMs);
  }
}
