// The OpenAPI description of uploads straight to the store (src/direct/,
// docs/direct-uploads.md): the owner's routes under /api/v1/uploads/direct.
// Through a file request the same routes sit under /r/{token}/uploads/direct,
// behind the link's guard (said in the description, not repeated). The body
// and answer schemas are src/direct/schemas.ts's.
import { z } from 'zod';
import { completeSchema, directInfoSchema, directUploadSchema, newDirectSchema, partUrlsSchema, signSchema } from '../direct/schemas.js';
import { ok } from '../wire-schemas.js';
import { API_KEY, apiErrors, bodyTimeout, codes, error, json, type AnswerSchemas, type Operation, type PathItem, success, uploadTooMany } from './shared.js';

export function directPaths({ upload }: AnswerSchemas): Record<string, PathItem> {
  const off = error(`${codes('direct_uploads_off')}: the server takes no uploads straight to the store (\`S3_DIRECT_UPLOADS\`); or ${codes('upload_not_found')}: no such upload in this account, or it was completed, aborted or expired.`);
  const invalid = error(`${codes('invalid_direct_upload')}, ${codes('invalid_filename')}, or an upload option's code (${codes('invalid_expires_in')}, ${codes('invalid_max_downloads')}, ${codes('invalid_password')}).`);
  const idParameter = { name: 'upload_id', in: 'path' as const, required: true, description: 'The upload\'s `upload_id`: 22 characters of base64url.', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' } };
  const op = (o: Omit<Operation, 'tags' | 'security'>): Operation => ({ ...o, tags: ['uploads'], security: API_KEY, responses: { ...apiErrors, '404': off, ...o.responses } });
  const through = ' Through a file request (no key), the same under `/r/{token}/uploads/direct`.';
  return {
    '/uploads/direct': {
      get: op({
        operationId: 'describeDirectUploads',
        summary: 'Whether the server takes uploads straight to the store, and its part bounds',
        description: `Clients probe this once and use tus or a plain upload on 404 \`direct_uploads_off\`.${through}`,
        responses: { '200': success('On.', directInfoSchema) },
      }),
      post: op({
        operationId: 'createDirectUpload',
        summary: 'Open an upload whose parts go straight to the store',
        description: `Every limit of an upload is checked before anything is signed; the declared \`size\` is reserved against the storage quota at once. The answer carries the URLs of the first 100 parts, each signed for its exact length.${through}`,
        requestBody: { required: true, content: json(newDirectSchema) },
        responses: {
          '201': success('The upload.', directUploadSchema),
          '400': invalid,
          '403': error(`${codes('file_too_large')}, ${codes('storage_quota_exceeded')}, ${codes('daily_upload_limit')}, or as every request.`),
          '408': bodyTimeout,
          '429': uploadTooMany,
        },
      }),
    },
    '/uploads/direct/{upload_id}': {
      parameters: [idParameter],
      get: op({
        operationId: 'getDirectUpload',
        summary: 'The upload, with the parts the store holds now (to resume)',
        responses: { '200': success('The upload and `parts_stored`.', directUploadSchema) },
      }),
      delete: op({
        operationId: 'abortDirectUpload',
        summary: 'Abort the upload: the store\'s parts go, and what it held comes back',
        responses: { '200': success('Aborted.', z.strictObject({ success: ok, message: z.string() })), '409': error(`${codes('upload_busy')}: a complete or an abort of it is under way.`) },
      }),
    },
    '/uploads/direct/{upload_id}/parts': {
      parameters: [idParameter],
      post: op({
        operationId: 'signDirectParts',
        summary: 'Sign URLs for up to 100 parts (fresh ones, or parts past the first 100)',
        requestBody: { required: true, content: json(signSchema) },
        responses: { '200': success('The URLs.', partUrlsSchema), '400': invalid, '408': bodyTimeout },
      }),
    },
    '/uploads/direct/{upload_id}/complete': {
      parameters: [idParameter],
      post: op({
        operationId: 'completeDirectUpload',
        summary: 'Make the stored parts a file, once they add up to what was declared',
        description: 'The service lists the parts the store holds and checks them against the declared size and part size and the ETags sent, completes the object, checks a declared `sha256` by reading it back, then makes the file as every upload\'s (primary link, counters, `file.uploaded`). Through a file request the answer is a receipt `{success, filename, size}`.',
        requestBody: { required: true, content: json(completeSchema) },
        responses: {
          '201': success('The file.', upload),
          '400': invalid,
          '408': bodyTimeout,
          '409': error(`${codes('upload_busy')}: another complete or abort of it is under way; try again.`),
          '422': error(`${codes('direct_upload_mismatch')}: what the store holds does not add up; the upload was aborted and nothing kept.`),
        },
      }),
    },
  };
}
