// ctx.ip is worked out once per connection for its peer (src/http/client-address.ts);
// a trusted proxy's keep-alive connection carries many clients, each its own.
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import { clientAddress } from '../../src/http/client-address.js';

function get(url: string, agent: Agent, forwardedFor?: string): Promise<{ ip: string; port: number }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers: forwardedFor ? { 'X-Forwarded-For': forwardedFor } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolve(JSON.parse(body)));
    });
    req.on('error', reject).end();
  });
}

describe('client address per connection', () => {
  let server: Server;
  let url: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });

  before(async () => {
    const app = new Koa();
    app.use(clientAddress({ trust: ['127.0.0.1'], hops: 1, ipv6Prefix: 64 }));
    app.use((ctx) => (ctx.body = { ip: ctx.ip, port: ctx.req.socket.remotePort }));
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });

  after(async () => {
    agent.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('when one keep-alive connection of a trusted proxy carries several clients, then each request counts as its own client, and one without the header as the proxy', async () => {
    const seen = [
      await get(url, agent),
      await get(url, agent, '203.0.113.7'),
      await get(url, agent, '2001:db8:1:2::5'),
      await get(url, agent),
      await get(url, agent, '198.51.100.9'),
    ];
    expect(new Set(seen.map((s) => s.port)).size, 'one connection').to.equal(1);
    expect(seen.map((s) => s.ip)).to.deep.equal(['127.0.0.1', '203.0.113.7', '2001:db8:1:2::/64', '127.0.0.1', '198.51.100.9']);
  });
});
