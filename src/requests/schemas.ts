// File requests on the wire (issue 52, "the API described once"): the body
// that opens one, as src/http/request-routes.ts validates it, and a request
// as the API shows it. src/openapi/ documents these very schemas.
import { z } from 'zod';
import { normalName, unshowable } from '../files/filename.js';
import { MAX_OPTION_INT, MAX_PASSWORD_LENGTH } from '../files/upload-options.js';
import { bytes, count, optionalDate, publicUrlOf, wireDate } from '../wire-schemas.js';
import { REQUEST_DEFAULTS } from './service.js';

/** The most files one request may ask for. */
export const MAX_REQUEST_FILES = 10_000;

/** The most characters (code points) of a title. */
export const MAX_TITLE_LENGTH = 200;

/**
 * A title is shown to outsiders on the upload page and to the owner in every
 * listing, as a filename is: the filename rules apply (src/files/filename.ts:
 * no control, bidirectional or invisible characters, not blank), so NUL (a
 * 500 from PostgreSQL before), U+202E and CR/LF are refused with 400.
 */
const title = z
  .string()
  .transform(normalName)
  .superRefine((text, ctx) => {
    const problem = unshowable(text, 'the title') ?? ([...text].length > MAX_TITLE_LENGTH ? `longer than ${MAX_TITLE_LENGTH} characters` : undefined);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .meta({
    minLength: 1,
    maxLength: MAX_TITLE_LENGTH,
    description: `1 to ${MAX_TITLE_LENGTH} characters, under the filename rules: no control characters (NUL, CR, LF...), bidirectional controls (U+202E...) or invisible ones, not blank; otherwise 400 \`invalid_file_request\`.`,
  });

/** The body of POST /requests. */
export const newRequestSchema = z.strictObject({
  title: title.optional(),
  // null: explicitly no limit; absent: the default (service.ts, REQUEST_DEFAULTS).
  max_files: z.number().int().min(1).max(MAX_REQUEST_FILES).nullable().optional().meta({ description: `Absent: ${REQUEST_DEFAULTS.maxFiles}. null: no limit.` }),
  max_file_size: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  expires_in: z.number().int().min(1).max(MAX_OPTION_INT).nullable().optional().meta({ description: `Seconds from now. Absent: ${REQUEST_DEFAULTS.expiresIn} (7 days). null: never.` }),
  password: z.string().min(1).refine((p) => [...p].length <= MAX_PASSWORD_LENGTH).optional().meta({ maxLength: MAX_PASSWORD_LENGTH }),
});

/** A file request of the account. */
export const fileRequestSchema = (publicUrl: string) =>
  z
    .strictObject({
      request_id: z.string().regex(/^req_[A-Za-z0-9_-]{16}$/).meta({ description: 'Identifier of the request; used in paths.' }),
      title: z.string().nullable().meta({ description: 'Shown on the upload page (the filename rules apply: no control, bidirectional or invisible characters).' }),
      upload_link: publicUrlOf(publicUrl, '/r', '[A-Za-z0-9_-]{22}', 'Where outsiders upload (the page, `/files`, `/uploads`); the token is as unguessable as a download link\'s.'),
      max_files: z.number().int().min(1).nullable().meta({ description: `Files it accepts in all (files received and uploads in progress); null: no limit (only when asked for: a request made without \`max_files\` takes ${REQUEST_DEFAULTS.maxFiles}).` }),
      max_file_size: z.number().int().min(1).nullable().meta({ description: 'Bytes per file; the smaller of this and the plan\'s `max_file_size` applies. Null: the plan\'s.' }),
      expires_at: optionalDate(`When the link stops taking files (410 \`request_expired\`) and uploads in progress through it are cut; null: never (only when asked for: a request made without \`expires_in\` expires ${REQUEST_DEFAULTS.expiresIn / 86_400} days after its creation).`),
      files_received: count('Files received through it and still in the account.'),
      uploads_in_progress: count('Uploads through it in progress: each holds a place of `max_files`, one of the owner\'s daily uploads and its bytes, until it becomes a file or ends (`REQUEST_UPLOAD_EXPIRY` after it began at the latest; closing the request ends them all).'),
      bytes_held: bytes('What they hold: reserved against the owner\'s `max_total_size`, or stored so far by an unfinished tus upload, whichever is more'),
      has_password: z.boolean().meta({ description: 'Whether outsiders must send its password (HTTP Basic, any user name).' }),
      created_at: wireDate(),
    })
    .meta({ description: 'A file request of the account.' });
export type FileRequestAnswer = z.infer<ReturnType<typeof fileRequestSchema>>;
