// Who did something to an account, for its audit trail (issue 57): the key
// (by id and name), or the outsider's file request link, or the operator;
// and from where, the client address truncated unless AUDIT_FULL_ADDRESSES.
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { Prisma } from '../generated/prisma/client.js';

export interface Actor {
  /** A key of the account, an outsider through a file request link, someone through a download link (AUDIT_DOWNLOADS), the operator, the server. */
  kind: 'key' | 'request' | 'link' | 'operator' | 'system';
  /** api_keys.id, its key_id and its name at the time. */
  keyId: number | null;
  keyPublicId: string | null;
  keyName: string | null;
  /** The file request whose link an outsider used. */
  requestId: string | null;
  /** The client address, truncated (truncateAddress). */
  address: string | null;
}

/** What no request did (a service called by a test or a tool): still recorded, as the system's. */
export const SYSTEM: Actor = { kind: 'system', keyId: null, keyPublicId: null, keyName: null, requestId: null, address: null };

export const operator = (address: string | null): Actor => ({ ...SYSTEM, kind: 'operator', address });

/**
 * The address as the audit keeps it: by default the network, not the
 * machine (IPv4 /24, IPv6 /48, an IPv4-mapped IPv6 address as IPv4), which
 * says "the office", "that provider", without keeping a personal datum the
 * account's owner did not need (docs/keys.md, Audit). `full`: as it came.
 */
export function truncateAddress(address: string, full: boolean): string | null {
  if (net.isIP(address) === 0) return null;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  if (full) return parsed.toString();
  const cidr = parsed.kind() === 'ipv4' ? `${parsed.toString()}/24` : `${parsed.toString()}/48`;
  const network = parsed.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(cidr) : ipaddr.IPv6.networkAddressFromCIDR(cidr);
  return `${network.toString()}/${parsed.kind() === 'ipv4' ? 24 : 48}`;
}

/**
 * The columns after account_id, action and subject of an audit row, as SQL
 * values: for an INSERT ... SELECT in the statement that writes the fact
 * (auditSql), so the row and the fact commit together or not at all.
 */
const actorValues = (actor: Actor, now: Date) =>
  Prisma.sql`${actor.keyId}::integer, ${actor.keyPublicId}::text, ${actor.keyName}::text, ${actor.requestId}::text, ${actor.kind}, ${actor.address}::text, ${now}::timestamp(3)`;

/**
 * An INSERT of one audit row per row of `source` (a CTE of the statement
 * writing the fact), for a WITH clause: `audited AS (${auditSql(...)})`.
 * `accountColumn` and `subjectColumn` name source's columns.
 */
export function auditSql(action: string, source: string, accountColumn: string, subjectColumn: string, actor: Actor, now: Date): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO audit_events (account_id, action, subject, key_id, key_public_id, key_name, request_id, actor, client_address, created_at)
    SELECT ${Prisma.raw(`${accountColumn}`)}, ${action}, ${Prisma.raw(`${subjectColumn}`)}::text, ${actorValues(actor, now)} FROM ${Prisma.raw(source)}`;
}

/** The data of one audit row for Prisma's create, inside the transaction writing the fact. */
export const auditRow = (accountId: number, action: string, subject: string | null, actor: Actor, now: Date) => ({
  accountId,
  action,
  subject,
  keyId: actor.keyId,
  keyPublicId: actor.keyPublicId,
  keyName: actor.keyName,
  requestId: actor.requestId,
  actor: actor.kind,
  clientAddress: actor.address,
  createdAt: now,
});
