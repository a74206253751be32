// Direct uploads on the wire (docs/direct-uploads.md): the bodies routes.ts
// validates with, and the answers, which src/openapi/ documents.
import { z } from 'zod';
import { count, ok, wireDate } from '../wire-schemas.js';
import { MAX_OPTION_INT, MAX_PASSWORD_LENGTH } from '../files/upload-options.js';

/** Most part numbers one POST .../parts may ask to sign. */
export const MAX_SIGN = 100;

const partNumber = z.number().int().min(1).max(10_000);

/** The body of POST /uploads/direct. Options are checked by parseUploadOptions (as a new link's), the filename by cleanFilename. */
export const newDirectSchema = z.strictObject({
  filename: z.string().min(1).meta({ description: 'The file\'s name, under the filename rules (docs/errors.md `invalid_filename`).' }),
  size: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).meta({ description: 'The file\'s exact size in bytes (at least 1), reserved against the storage quota at once.', format: 'int64' }),
  part_size: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional().meta({ description: 'Bytes per part but the last: `min_part_size` to `max_part_size`; absent: the service picks.', format: 'int64' }),
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/).optional().meta({ description: 'Hex SHA-256 of the whole file, checked at complete by reading the object back.' }),
  expires_in: z.number().int().min(1).max(MAX_OPTION_INT).optional(),
  max_downloads: z.number().int().min(1).max(MAX_OPTION_INT).optional(),
  password: z.string().min(1).max(MAX_PASSWORD_LENGTH).optional(),
});

/** The body of POST /uploads/direct/{id}/parts. */
export const signSchema = z.strictObject({ part_numbers: z.array(partNumber).min(1).max(MAX_SIGN) });

/** The body of POST /uploads/direct/{id}/complete. */
export const completeSchema = z.strictObject({
  parts: z.array(z.strictObject({ part_number: partNumber, etag: z.string().min(1).max(200) })).min(1).max(10_000),
});

const partUrl = z.strictObject({ part_number: partNumber, size: count('Exact length of the part, signed into its URL.'), url: z.string() });

export const partUrlsSchema = z.strictObject({
  success: ok,
  part_urls: z.array(partUrl),
  url_expires_at: wireDate('When the URLs stop working (`YYYY-MM-DD HH:MM:SS`, UTC).'),
});

export const directUploadSchema = z.strictObject({
  success: ok,
  upload_id: z.string(),
  filename: z.string(),
  size: count('Declared size, bytes.'),
  part_size: count('Bytes of every part but the last.'),
  parts: count('Number of parts.'),
  expires_at: wireDate('When the sweep aborts it if not completed.'),
  part_urls: z.array(partUrl).optional().meta({ description: 'On create: the URLs of the first 100 parts.' }),
  url_expires_at: wireDate().optional(),
  parts_stored: z
    .array(z.strictObject({ part_number: partNumber, size: count('Bytes.'), etag: z.string() }))
    .optional()
    .meta({ description: 'On GET: the parts the store holds now.' }),
});

export const directInfoSchema = z.strictObject({
  success: ok,
  part_size: count('The part size the service picks for a file of up to 156 GiB.'),
  min_part_size: count('Least part size.'),
  max_part_size: count('Largest part size.'),
  max_parts: count('Most parts.'),
  url_seconds: count('How long a part URL lives at most.'),
  expiry_seconds: count('How long an upload may take from creation to complete.'),
});

export type DirectUploadAnswer = z.infer<typeof directUploadSchema>;
export type PartUrlsAnswer = z.infer<typeof partUrlsSchema>;
export type DirectInfoAnswer = z.infer<typeof directInfoSchema>;
