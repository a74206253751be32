// The pieces every answer and listing is made of, as zod schemas (issue 52,
// "the API described once"): dates, counts, byte sizes, public URLs, and the
// page and limit of a listing. The feature schemas (src/*/schemas.ts) build
// their answers from them; the routes validate with them, the presenters are
// typed by them, and src/openapi/ turns the same objects into the document.
import { z } from 'zod';

/** A JSON Schema pattern for text we put into one (a URL prefix): every special character escaped. */
export const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

const DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

/** A spec date (`YYYY-MM-DD HH:MM:SS`, UTC), as src/wire-date.ts writes it. */
export const wireDate = (description = '`YYYY-MM-DD HH:MM:SS`, UTC.', examples?: string[]) => z.string().regex(DATE).meta({ description, ...(examples ? { examples } : {}) });

/** A spec date (UTC) or null. */
export const optionalDate = (description: string) =>
  z.string().regex(DATE).nullable().meta({ description: `${description} \`YYYY-MM-DD HH:MM:SS\`, UTC.`, examples: ['2026-12-01 08:00:00', null] });

/** A count from 0. */
export const count = (description: string) => z.number().int().min(0).meta({ description, format: 'int64' });

/** A size in bytes. */
export const bytes = (description: string) => z.number().int().min(0).meta({ description: `${description}, in bytes`, format: 'int64' });

/** `success: true` of every successful answer. */
export const ok = z.literal(true);

/** Exactly one of the schemas (JSON Schema's `oneOf`; zod's union is rendered as `anyOf`). */
export const oneOf = <const T extends readonly [z.ZodType, ...z.ZodType[]]>(schemas: T) =>
  z.union(schemas).meta({
    override: ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
      jsonSchema.oneOf = jsonSchema.anyOf;
      delete jsonSchema.anyOf;
    },
  });

/** A URL under PUBLIC_URL: `<publicUrl><path>/<token>`, the token in `token`'s alphabet. */
export const publicUrlOf = (publicUrl: string, path: string, token: string, description: string) =>
  z.string().regex(new RegExp(`^${escapeRegExp(publicUrl)}${path}/${token}$`)).meta({ description, format: 'uri' });

/** A digits-only string of the query or path, documented as the integer it stands for (zod-openapi renders the string). */
export const asInteger = (keywords: Record<string, number>) => ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
  delete jsonSchema.pattern;
  Object.assign(jsonSchema, { type: 'integer', ...keywords });
};

/**
 * A positive integer of the query string: digits only (no sign, exponent or
 * spaces), from 1 to `max`, `fallback` when absent. The document states it as
 * the integer it stands for, as the parameter component `id`.
 */
const queryInt = (id: string, max: number, fallback: number, description: string) =>
  z
    .string()
    .regex(/^[0-9]{1,9}$/)
    .transform(Number)
    .pipe(z.number().int().min(1).max(max))
    .default(fallback)
    .meta({ param: { id, description }, override: asInteger({ minimum: 1, maximum: max, default: fallback }) });

/** The largest integer an option takes (PostgreSQL's integer): seconds of `expires_in`, `max_downloads`. */
export const MAX_INT32 = 2_147_483_647;

/** Items per page at most. */
export const MAX_LIMIT = 100;

/** `page` (from 1) and `limit` (1 to 100, 20 unless given) of every listing. */
export const pageQuery = z.object({
  page: queryInt('Page', 999_999_999, 1, 'Page number; past the last page the list is empty.'),
  limit: queryInt('Limit', MAX_LIMIT, 20, 'Items per page.'),
});

/** The pagination object of a listing's answer. */
export const paginationSchema = z.strictObject({
  page: z.number().int().min(1).meta({ description: 'Current page number.' }),
  limit: z.number().int().min(1).max(MAX_LIMIT).meta({ description: 'Items per page.' }),
  total: count('Total number of files.'),
  pages: count('Number of pages: ceil(total / limit).'),
});
