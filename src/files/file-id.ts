import { badRequest } from '../errors.js';
import { MAX_FILE_ID } from './record.js';
import { fileIdParam } from './schemas.js';

/** The file id of a path (400 invalid_file_id). */
export function parseFileId(raw: string): number {
  const result = fileIdParam.safeParse(raw);
  if (!result.success) throw badRequest('invalid_file_id', `file_id must be an integer from 1 to ${MAX_FILE_ID}`);
  return result.data;
}
