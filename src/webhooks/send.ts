// One POST of one message to one endpoint, with the safety rules of issue 44:
// no private addresses (checked on the address actually connected to, after
// DNS: public-address.ts), no redirects (node:http follows none), a deadline
// over the whole exchange, and at most RESPONSE_BYTES of the answer read.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { NotPublicAddressError, publicOnly, publicOnlyLookup } from './public-address.js';

/** What is read of a receiver's answer: enough for an error message, never more. */
export const RESPONSE_BYTES = 4096;

export interface SendResult {
  /** The receiver's status; undefined when there was no answer. */
  status?: number;
  /** Why it failed (no answer, refused address, timeout, the start of a non-2xx body): what the account sees. */
  error?: string;
  /** For the operator's log only: the refused address and the name it came from (never shown to the account). */
  detail?: string;
}

export interface Agents {
  http: http.Agent;
  https: https.Agent;
  destroy(): void;
}

/**
 * The agents deliveries go through: one pair per relay, keeping connections
 * to receivers alive between messages. `allowPrivate` (WEBHOOK_ALLOW_PRIVATE)
 * lifts the address rule for on-premise receivers and tests. `lookup` is the
 * resolver (dns.lookup; tests answer names with addresses of their choosing).
 */
export function createAgents(allowPrivate: boolean, maxSocketsPerHost: number, lookup: net.LookupFunction = dns.lookup as net.LookupFunction): Agents {
  const options = { keepAlive: true, maxSockets: maxSocketsPerHost, timeout: 30_000 };
  const agents = allowPrivate
    ? { http: new http.Agent({ ...options, lookup }), https: new https.Agent({ ...options, lookup }) }
    : {
        http: publicOnly(new http.Agent(options), publicOnlyLookup(lookup)),
        https: publicOnly(new https.Agent(options), publicOnlyLookup(lookup)),
      };
  return { ...agents, destroy: () => (agents.http.destroy(), agents.https.destroy()) };
}

/** What a failed send records: a refused address says so without the address (issue 50), the rest is Node's message. */
const failure = (err: Error): SendResult =>
  err instanceof NotPublicAddressError ? { error: err.message, detail: `${err.address} (host ${err.host})` } : { error: err.message };

/** POSTs `body`; resolves (never rejects) once the answer's status and first bytes are in, or it failed. */
export function send(agents: Agents, url: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<SendResult> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: SendResult) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    let req: http.ClientRequest;
    try {
      req = client.request(target, {
        method: 'POST',
        agent: target.protocol === 'https:' ? agents.https : agents.http,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'dropstream-webhooks' },
        signal,
      });
    } catch (err) {
      done(failure(err as Error));
      return;
    }
    req.on('error', (err) => done(signal.aborted ? { error: 'timed out' } : failure(err)));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        if (read < RESPONSE_BYTES) chunks.push(chunk.subarray(0, RESPONSE_BYTES - read));
        read += chunk.length;
        // Enough read: the rest is not wanted, and the connection is not worth keeping for it.
        if (read >= RESPONSE_BYTES) res.destroy();
      });
      const finish = () => {
        const text = Buffer.concat(chunks).toString('utf8').slice(0, 200);
        done(status >= 200 && status < 300 ? { status } : { status, error: `HTTP ${status}${text ? `: ${text}` : ''}` });
      };
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', () => finish());
    });
    req.end(body);
  });
}
