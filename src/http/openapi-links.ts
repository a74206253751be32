// The OpenAPI description of a file's links (src/files/link-routes.ts):
// the Link schema and the three operations under /files/{file_id}/links.
import {
  API_KEY,
  apiErrors,
  bodyTimeout,
  codes,
  count,
  error,
  escapeRegExp,
  object,
  ok,
  optionalDate,
  type PathItem,
  ref,
  type Schema,
  success,
  uploadOptionFields,
} from './openapi-shared.js';

/** The Link schema: what GET and POST answer for each link. */
export const linkSchema = (publicUrl: string): Schema =>
  object({
    link_id: { type: 'string', format: 'uuid', description: 'Identifier of the link; used in paths. Tells nothing about the token.' },
    public_link: { type: 'string', format: 'uri', pattern: `^${escapeRegExp(publicUrl)}/download/[A-Za-z0-9_-]+$`, description: 'The link\'s download URL.' },
    primary: { type: 'boolean', description: 'Whether this is the file\'s `public_link`. Every file has exactly one primary link.' },
    expires_at: optionalDate('When the link stops working: its own `expires_in` or its file\'s expiry, whichever comes first. Null: never.'),
    max_downloads: { type: ['integer', 'null'], minimum: 1, description: 'Complete downloads the link serves, as a byte budget of `max_downloads` x size (ranges count their bytes). Null: unlimited.' },
    download_count: count('Complete whole-file downloads through this link (the file\'s `download_count` counts them over all its links).'),
    password_protected: { type: 'boolean', description: 'Whether downloads need the password (HTTP Basic, any user name).' },
  }, 'A public link to a file, with its own rules and count.');

export function linkPaths(): Record<string, PathItem> {
  const link = ref('schemas', 'Link');
  const noFile = error(`No such file in this account (another account's file gives the same answer): ${codes('file_not_found')}.`);
  const badId = error(`\`file_id\` is not a positive integer: ${codes('invalid_file_id')}.`);
  return {
    '/files/{file_id}/links': {
      parameters: [ref('parameters', 'FileId')],
      get: {
        operationId: 'listLinks',
        summary: 'List a file\'s links, the primary link first',
        tags: ['links'],
        security: API_KEY,
        responses: {
          '200': success('The file\'s links.', object({ success: ok, links: { type: 'array', minItems: 1, items: link } })),
          ...apiErrors,
          '400': badId,
          '404': noFile,
        },
      },
      post: {
        operationId: 'createLink',
        summary: 'Make another link to a file, with its own rules',
        description: 'Every field is optional; an empty object (or no body) makes a plain link. `expires_in` counts from now; the link also ends with its file.',
        tags: ['links'],
        security: API_KEY,
        requestBody: { required: false, content: { 'application/json': { schema: { type: 'object', additionalProperties: false, properties: uploadOptionFields } } } },
        responses: {
          '201': success('The new link.', object({ success: ok, link })),
          ...apiErrors,
          '400': error(`A bad body: ${codes('invalid_json', 'unknown_field', 'invalid_expires_in', 'invalid_max_downloads', 'invalid_password')}; or ${codes('invalid_file_id')}.`),
          '408': bodyTimeout,
          '404': noFile,
        },
      },
    },
    '/files/{file_id}/links/{link_id}': {
      parameters: [ref('parameters', 'FileId'), { name: 'link_id', in: 'path', required: true, description: 'The link\'s `link_id`.', schema: { type: 'string' } }],
      delete: {
        operationId: 'revokeLink',
        summary: 'Revoke a link',
        description: 'The link\'s URL answers 404 at once, on every instance. Revoking the primary link rotates it: the file gets a fresh primary link with the same rules (password, `max_downloads`, expiry) and new counts, its `public_link` shows it, and the answer carries it as `link`.',
        tags: ['links'],
        security: API_KEY,
        responses: {
          '200': success('The link is revoked; for the primary link, with the file\'s fresh primary link.', {
            oneOf: [
              object({ success: ok, message: { type: 'string', const: 'Link revoked' } }),
              object({ success: ok, message: { type: 'string', const: 'Link revoked; the file has a new primary link' }, link }),
            ],
          }),
          ...apiErrors,
          '400': badId,
          '404': error(`No such link on this file (or no such file in this account): ${codes('link_not_found')}.`),
        },
      },
    },
  };
}
