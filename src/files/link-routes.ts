// The links of a file (issue 23): list, create, revoke. Under /api/v1, with
// the same guard (key, plan, rate limits, counting) as every other route;
// reading them needs files:read, making and revoking them links:write.
import Router from '@koa/router';
import { badRequest } from '../errors.js';
import { fileErrors } from './errors.js';
import { OPTION_NAMES, isOptionName, linkRulesOf, parseUploadOptions } from './upload-options.js';
import type { LinkService } from '../links/service.js';
import { parseFileId } from './file-id.js';
import type { AuthState } from '../http/auth.js';
import type { Need } from '../http/scoped.js';
import { jsonBody } from '../http/json-body.js';
import { presentLink } from './present.js';

export interface LinkRouteDeps {
  links: LinkService;
  publicUrl: string;
  /** BODY_TIMEOUT in milliseconds. */
  bodyTimeoutMs: number;
}

/** A new link's options: a JSON object of the three option fields at most (an empty body is none). */
function linkOptions(body: unknown) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('invalid_json', 'The body must be a JSON object');
  const unknown = Object.keys(body).find((name) => !isOptionName(name));
  if (unknown !== undefined) throw badRequest('unknown_field', `Unknown field "${unknown.slice(0, 64)}": a link takes ${OPTION_NAMES.join(', ')}`);
  return parseUploadOptions(body as Record<string, unknown>, 'json');
}

/** A file's public links, mounted at /api/v1/files (their paths are /{id}/links...). */
export function linkRoutes(need: Need, { links: service, publicUrl, bodyTimeoutMs }: LinkRouteDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const body = jsonBody({ limit: '16kb', invalid: () => badRequest('invalid_json', 'The body must be a JSON object'), timeoutMs: bodyTimeoutMs });
  router.get('/:id/links', need('files:read'), async (ctx) => {
    const links = await service.list(ctx.state.caller.accountId, parseFileId(ctx.params.id!));
    if (!links) throw fileErrors.notFound();
    ctx.body = { success: true, links: links.map((link) => presentLink(link, publicUrl)) };
  });

  // The key is checked before the body is read, as on every route.
  router.post('/:id/links', need('links:write'), body, async (ctx) => {
    const fileId = parseFileId(ctx.params.id!);
    // expires_in counts from now; the password is hashed before the link is written.
    const now = service.clock();
    const link = await service.create(ctx.state.caller.accountId, fileId, await linkRulesOf(linkOptions(ctx.request.body ?? {}), now), now, ctx.state.caller.actor);
    if (!link) throw fileErrors.notFound();
    ctx.status = 201;
    ctx.body = { success: true, link: presentLink(link, publicUrl) };
  });

  router.delete('/:id/links/:linkId', need('links:write'), async (ctx) => {
    const revoked = await service.revoke(ctx.state.caller.accountId, parseFileId(ctx.params.id!), ctx.params.linkId!, ctx.state.caller.actor);
    // The file's new public link, so the owner need not list the links to learn it.
    ctx.body =
      revoked.outcome === 'rotated'
        ? { success: true, message: 'Link revoked; the file has a new primary link', link: presentLink(revoked.primary, publicUrl) }
        : { success: true, message: 'Link revoked' };
  });
  return router;
}

