// createListener and drain (src/listener.ts): what a drained listener leaves behind.
import { expect } from 'chai';
import { createListener, drain, listen } from '../src/listener.js';

describe('listener drain', () => {
  it('when a listener is drained, then the timer that checks its connections every second is stopped too', async () => {
    const server = createListener((_req, res) => res.end('ok'), { headersSeconds: 5, idleSeconds: 5 });
    await listen(server, 0, '127.0.0.1');
    const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connectionsCheckingInterval');
    expect(key, "Node's connections-check timer").to.not.equal(undefined);
    const timer = (server as unknown as Record<symbol, NodeJS.Timeout & { _destroyed: boolean }>)[key!]!;
    expect(timer._destroyed).to.equal(false);
    expect(await drain(server, 1000)).to.deep.equal({ cut: 0, delivering: 0 });
    expect(timer._destroyed).to.equal(true);
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
