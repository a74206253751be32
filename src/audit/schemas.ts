// The audit trail on the wire (issue 52, "the API described once"): the
// filter of GET /audit as src/trail/routes.ts validates it, and an
// entry as the API shows it. src/openapi/ documents these very schemas.
import { z } from 'zod';
import { wireDate } from '../wire-schemas.js';
import { AUDIT_ACTIONS } from './actions.js';

const time = (description: string) =>
  z
    .union([z.iso.datetime({ offset: true }), z.iso.date()])
    .transform((text) => new Date(text))
    .optional()
    .meta({ param: { description } });

/** The filter of GET /audit (its page and limit are every listing's). */
export const auditFilterQuery = z.object({
  action: z.enum(AUDIT_ACTIONS).optional().meta({ param: { description: 'Only this action.' } }),
  since: time('From this ISO 8601 date or time on (inclusive).'),
  until: time('Before this ISO 8601 date or time.'),
});

/** One change to the account. */
export const auditEventSchema = z
  .strictObject({
    action: z.enum(AUDIT_ACTIONS),
    subject: z.string().nullable().meta({ description: 'What it is about: a key_id, file_id, link_id, request_id or webhook_id; the plan for plan.changed.' }),
    actor: z.enum(['key', 'request', 'link', 'operator', 'system']).meta({ description: 'A key of the account, an outsider through a file request link, someone downloading through a link (file.downloaded, with AUDIT_DOWNLOADS), the operator (admin API), or the server itself.' }),
    key_id: z.string().nullable().meta({ description: 'The key that did it.' }),
    key_name: z.string().nullable().meta({ description: 'Its name at the time.' }),
    request_id: z.string().nullable().meta({ description: 'The file request whose link an outsider used.' }),
    client_address: z.string().nullable().meta({ description: 'The client\'s network: IPv4 /24, IPv6 /48 (the whole address with AUDIT_FULL_ADDRESSES).' }),
    created_at: wireDate(),
  })
  .meta({ description: 'One change to the account.' });
export type AuditEventAnswer = z.infer<typeof auditEventSchema>;
