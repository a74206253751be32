// The page and limit of a listing (GET /files, GET /uploads): one parser, so
// every list pages alike and answers a bad value alike.
import { z } from 'zod';
import { badRequest } from '../errors.js';

const positiveInt = z.string().regex(/^[0-9]{1,9}$/).transform(Number).pipe(z.number().int().min(1));

const listQuery = z.object({
  page: positiveInt.default(1),
  limit: positiveInt.pipe(z.number().max(100)).default(20),
});

/** `page` (from 1) and `limit` (1 to 100, 20 unless given) of the query; 400 invalid_parameter naming the bad one. */
export function parseListQuery(query: unknown): { page: number; limit: number } {
  const result = listQuery.safeParse(query);
  if (!result.success) {
    const field = result.error.issues[0]?.path[0] ?? 'page';
    throw badRequest('invalid_parameter', field === 'limit' ? 'limit must be an integer from 1 to 100' : 'page must be an integer of at least 1');
  }
  return result.data;
}

/** The pagination object of a listing's answer. */
export const pagination = (page: number, limit: number, total: number) => ({ page, limit, total, pages: Math.ceil(total / limit) });
