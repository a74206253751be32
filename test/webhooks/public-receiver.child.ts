// Run by public-receiver.test.ts inside a private network namespace whose lo
// holds a public IPv4 and a public IPv6 address: a receiver listening on
// them, and the relay's public-only agents sending to it by address and by
// name. Prints one JSON line: each send's result.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { LookupFunction } from 'node:net';
import { createAgents, send } from '../../src/webhooks/send.js';

const [v4, v6] = process.argv.slice(2) as [string, string];
const receiver = createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()));
receiver.listen(0, '::');
await once(receiver, 'listening');
const { port } = receiver.address() as { port: number };

/** receiver.example answers with both addresses, as a dual-stack name would. */
const lookup = ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
  const answers = [{ address: v6, family: 6 }, { address: v4, family: 4 }];
  if (hostname !== 'receiver.example') callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
  else if (options.all) callback(null, answers);
  else callback(null, v6, 6);
}) as unknown as LookupFunction;

const agents = createAgents(false, 4, lookup);
const results: Record<string, unknown> = {};
for (const url of [`http://${v4}:${port}/hook`, `http://[${v6}]:${port}/hook`, `http://receiver.example:${port}/hook`]) {
  results[url.replace(`:${port}`, '')] = await send(agents, url, {}, '{}', AbortSignal.timeout(10_000));
}
agents.destroy();
receiver.close();
console.log(JSON.stringify(results));
