// The page and limit of a listing (GET /files, GET /uploads): one parser, so
// every list pages alike and answers a bad value alike. The schema is
// src/wire-schemas.ts's, which the OpenAPI document states too.
import { badRequest } from '../errors.js';
import { MAX_LIMIT, pageQuery, type paginationSchema } from '../wire-schemas.js';
import type { z } from 'zod';

/** `page` (from 1) and `limit` (1 to 100, 20 unless given) of the query; 400 invalid_parameter naming the bad one. */
export function parseListQuery(query: unknown): { page: number; limit: number } {
  const result = pageQuery.safeParse(query);
  if (!result.success) {
    const field = result.error.issues[0]?.path[0] ?? 'page';
    throw badRequest('invalid_parameter', field === 'limit' ? `limit must be an integer from 1 to ${MAX_LIMIT}` : 'page must be an integer of at least 1');
  }
  return result.data;
}

/** The pagination object of a listing's answer. */
export const pagination = (page: number, limit: number, total: number): z.infer<typeof paginationSchema> => ({ page, limit, total, pages: Math.ceil(total / limit) });
