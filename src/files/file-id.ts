import { z } from 'zod';
import { badRequest } from '../errors.js';
import { MAX_FILE_ID } from './record.js';

/** File ids are drawn from 1..MAX_FILE_ID (record.ts): ten digits at most. */
const fileId = z.string().regex(/^[0-9]{1,10}$/).transform(Number).pipe(z.number().int().min(1).max(MAX_FILE_ID));

/** The file id of a path (400 invalid_file_id). */
export function parseFileId(raw: string): number {
  const result = fileId.safeParse(raw);
  if (!result.success) throw badRequest('invalid_file_id', `file_id must be an integer from 1 to ${MAX_FILE_ID}`);
  return result.data;
}
