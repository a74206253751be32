// The OpenAPI description of a file's links (src/http/link-routes.ts):
// the three operations under /files/{file_id}/links. The Link schema is
// src/links/schemas.ts's.
import { z } from 'zod';
import { fileIdPath, fileIdParam } from '../files/schemas.js';
import { ok, oneOf } from '../wire-schemas.js';
import { API_KEY, apiErrors, bodyTimeout, codes, error, type PathItem, success, uploadOptionFields, type AnswerSchemas } from './shared.js';

/** The path of DELETE /files/{file_id}/links/{link_id}. */
const linkIdPath = z.object({ file_id: fileIdParam, link_id: z.string().meta({ param: { description: 'The link\'s `link_id`.' } }) });

export function linkPaths({ link }: AnswerSchemas): Record<string, PathItem> {
  const noFile = error(`No such file in this account (another account's file gives the same answer): ${codes('file_not_found')}.`);
  const badId = error(`\`file_id\` is not a positive integer: ${codes('invalid_file_id')}.`);
  return {
    '/files/{file_id}/links': {
      get: {
        operationId: 'listLinks',
        summary: 'List a file\'s links, the primary link first',
        tags: ['links'],
        security: API_KEY,
        requestParams: { path: fileIdPath },
        responses: {
          '200': success('The file\'s links.', z.strictObject({ success: ok, links: z.array(link).min(1) })),
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
        requestParams: { path: fileIdPath },
        requestBody: { required: false, content: { 'application/json': { schema: { type: 'object', additionalProperties: false, properties: uploadOptionFields } } } },
        responses: {
          '201': success('The new link.', z.strictObject({ success: ok, link })),
          ...apiErrors,
          '400': error(`A bad body: ${codes('invalid_json', 'unknown_field', 'invalid_expires_in', 'invalid_max_downloads', 'invalid_password')}; or ${codes('invalid_file_id')}.`),
          '408': bodyTimeout,
          '404': noFile,
        },
      },
    },
    '/files/{file_id}/links/{link_id}': {
      delete: {
        operationId: 'revokeLink',
        summary: 'Revoke a link',
        description: 'The link\'s URL answers 404 at once, on every instance. Revoking the primary link rotates it: the file gets a fresh primary link with the same rules (password, `max_downloads`, expiry) and new counts, its `public_link` shows it, and the answer carries it as `link`.',
        tags: ['links'],
        security: API_KEY,
        requestParams: { path: linkIdPath },
        responses: {
          '200': success('The link is revoked; for the primary link, with the file\'s fresh primary link.', oneOf([
            z.strictObject({ success: ok, message: z.literal('Link revoked') }),
            z.strictObject({ success: ok, message: z.literal('Link revoked; the file has a new primary link'), link }),
          ])),
          ...apiErrors,
          '400': badId,
          '404': error(`No such link on this file (or no such file in this account): ${codes('link_not_found')}.`),
        },
      },
    },
  };
}
