// createListener and drain (src/listener.ts): what a drained listener leaves behind.
import { once } from 'node:events';
import { connect } from 'node:net';
import { expect } from 'chai';
import { createListener, drain, listen } from '../src/listener.js';
import { startPollers, unanswered } from './helpers/keep-alive-pollers.js';

describe('listener drain', () => {
  it('when a listener is drained, then the timer that checks its connections every second is stopped too', async () => {
    const server = createListener((_req, res) => res.end('ok'), { headersSeconds: 5, idleSeconds: 5 });
    await listen(server, 0, '127.0.0.1');
    const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connectionsCheckingInterval');
    expect(key, "Node's connections-check timer").to.not.equal(undefined);
    const timer = (server as unknown as Record<symbol, NodeJS.Timeout & { _destroyed: boolean }>)[key!]!;
    expect(timer._destroyed).to.equal(false);
    expect(await drain(server, 1000)).to.deep.equal({ cut: 0, delivering: 0, idleClosed: 0, resetRequests: 0 });
    expect(timer._destroyed).to.equal(true);
  });

  it('when 6 keep-alive pollers cross a drain, then every request they sent is answered, the last with Connection: close, and none is reset (20 rounds, issue 51)', async () => {
    for (let round = 1; round <= 20; round++) {
      const server = createListener((_req, res) => res.end('ok'), { headersSeconds: 5, idleSeconds: 5 });
      const pollers = startPollers(await listen(server, 0, '127.0.0.1'));
      try {
        await pollers.warmedUp();
        const drained = await drain(server, 5000, { idleWaitMs: 5000 });
        await pollers.done;
        expect(unanswered(pollers.polls), `round ${round}`).to.deep.equal([]);
        expect(drained, `round ${round}`).to.deep.equal({ cut: 0, delivering: 0, idleClosed: 0, resetRequests: 0 });
      } finally {
        pollers.stop();
        await drain(server, 0);
      }
    }
  });

  it('when a request has begun to arrive as the drain starts, then its connection is not closed under it: the request is answered with Connection: close', async () => {
    const server = createListener((_req, res) => res.end('ok'), { headersSeconds: 5, idleSeconds: 5 });
    const { port } = new URL(await listen(server, 0, '127.0.0.1'));
    const client = connect(Number(port), '127.0.0.1');
    client.on('error', () => {});
    let answer = '';
    client.on('data', (chunk: Buffer) => (answer += chunk));
    client.write('GET / HTTP/1.1\r\nHo');
    // Node has read the first bytes (its list of connections counts the request as begun).
    const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connections')!;
    const connections = (server as unknown as Record<symbol, { active(): unknown[] }>)[key]!;
    while (connections.active().length === 0) await new Promise((r) => setTimeout(r, 5));
    // No wait for idle connections: only a request begun keeps this one open.
    const drained = drain(server, 5000, { idleWaitMs: 0 });
    await new Promise((r) => setTimeout(r, 100));
    client.write('st: test\r\n\r\n');
    // Bounded: a connection closed under the request may never say so.
    await Promise.race([once(client, 'close'), new Promise((r) => setTimeout(r, 2000))]);
    client.destroy();
    expect(answer).to.match(/^HTTP\/1\.1 200 OK\r\n/).and.match(/\r\nConnection: close\r\n/i).and.match(/\r\n\r\nok$/);
    expect(await drained).to.deep.equal({ cut: 0, delivering: 0, idleClosed: 0, resetRequests: 0 });
  });

  it('when a keep-alive connection stays idle through the wait, then the drain ends it and counts it; a request that crossed that end is not served, and is counted as reset', async () => {
    let served = 0;
    const server = createListener((_req, res) => {
      served += 1;
      res.end('ok');
    }, { headersSeconds: 5, idleSeconds: 5 });
    const { port } = new URL(await listen(server, 0, '127.0.0.1'));
    // Half-open, so it can still send after the server's FIN, as a client does whose request crossed it.
    const client = connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    client.on('error', () => {});
    const request = 'GET / HTTP/1.1\r\nHost: test\r\n\r\n';
    client.write(request);
    await once(client, 'data');
    const started = Date.now();
    const drained = drain(server, 5000, { idleWaitMs: 300 });
    // The server's FIN, after the wait; the client's next request was on its way.
    await once(client, 'end');
    expect(Date.now() - started).to.be.at.least(250);
    client.write(request);
    expect(await drained).to.deep.equal({ cut: 0, delivering: 0, idleClosed: 1, resetRequests: 1 });
    expect(served).to.equal(1);
    client.destroy();
  });
});

describe('listener errors', () => {
  it('when a listening server emits an error (an accept failing with EMFILE), then listen()\'s handler hears it and the server keeps serving', async () => {
    const server = createListener((_req, res) => res.end('ok'), { headersSeconds: 5, idleSeconds: 5 });
    const heard: Error[] = [];
    const url = await listen(server, 0, '127.0.0.1', (err) => heard.push(err));
    try {
      // What net.Server does when libuv reports a failed accept (lib/net.js, onconnection).
      const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });
      expect(() => server.emit('error', emfile)).to.not.throw();
      expect(heard).to.deep.equal([emfile]);
      expect(await (await fetch(url)).text()).to.equal('ok');
    } finally {
      await drain(server, 1000);
    }
  });
});
