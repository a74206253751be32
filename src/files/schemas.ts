// A file as the API shows it and the file id of a path (issue 52, "the API
// described once"): the routes validate with these schemas, the presenters
// (src/files/present.ts) are typed by them, and src/openapi/ documents them.
import { z } from 'zod';
import { asInteger, bytes, count, ok, optionalDate, publicUrlOf, wireDate } from '../wire-schemas.js';
import { MAX_FILE_ID } from './record.js';

/** File ids are drawn from 1..MAX_FILE_ID (record.ts): ten digits at most. */
export const fileIdParam = z
  .string()
  .regex(/^[0-9]{1,10}$/)
  .transform(Number)
  .pipe(z.number().int().min(1).max(MAX_FILE_ID))
  .meta({
    param: { id: 'FileId', description: 'The file identifier (random, it counts nothing); anything but an integer from 1 to 2147483647 is 400 `invalid_file_id`.' },
    override: asInteger({ minimum: 1, maximum: MAX_FILE_ID }),
  });

/** The path of every /files/{file_id} operation. */
export const fileIdPath = z.object({ file_id: fileIdParam });

/** The file record's fields; the upload's answer reuses four of them. */
export const fileFields = (publicUrl: string) => ({
  file_id: z.number().int().min(1).meta({ description: 'Identifier of the file; used in paths.' }),
  filename: z.string().min(1).max(255).meta({ description: 'Name of the uploaded file (last path segment, NFC, at most 255 bytes of UTF-8).' }),
  size: bytes('Size of the file'),
  upload_date: wireDate('Upload time in UTC, `YYYY-MM-DD HH:MM:SS`.', ['2026-11-21 23:24:04']),
  download_count: count('Completed whole-file downloads.'),
  public_link: publicUrlOf(publicUrl, '/download', '[A-Za-z0-9_-]+', 'Public download URL (the file\'s primary link); the link is the credential.'),
  expires_at: optionalDate('When the file expires (the upload\'s `expires_in`): from then on every link to it answers 410 `link_expired`, and the sweeper deletes it. Null: it never expires.'),
  request_id: z.string().nullable().meta({ description: 'The file request it came through (`/requests/{request_id}`); null for the account\'s own uploads.' }),
});

/** A file record (GET /files/{file_id}, list items). */
export const fileSchema = (publicUrl: string) => z.strictObject(fileFields(publicUrl)).meta({ description: 'A file record.' });
export type FileAnswer = z.infer<ReturnType<typeof fileSchema>>;

/** The answer to an upload: the spec's four fields and nothing else (the spec says "only"; issue 50). */
export const uploadAnswerSchema = (publicUrl: string) => {
  const { file_id, public_link, size, filename } = fileFields(publicUrl);
  return z.strictObject({ success: ok, file_id, public_link, size, filename });
};
export type UploadAnswer = z.infer<ReturnType<typeof uploadAnswerSchema>>;
