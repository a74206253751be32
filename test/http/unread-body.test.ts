// Answers given before the body was read to its end (src/http/unread-body.ts),
// on a bare Node server with raw client sockets: a large unread body gets a
// readable answer and then the connection ends; a small one is dropped and
// the connection serves the next request; a body reader that starts late
// still sees its client's hang-up, and nothing is thrown out of the process.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { expect } from 'chai';
import { closeAfterAnswer, detachableBody } from '../../src/http/unread-body.js';

const MiB = 1024 * 1024;

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

/** Everything the server sent until it closed the connection (or `ms` passed), and whether a reset came. */
function collect(socket: Socket, ms = 5000): Promise<{ text: string; reset: boolean; closed: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    let reset = false;
    const timer = setTimeout(() => resolve({ text, reset, closed: false }), ms);
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => (reset = true));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, reset, closed: true });
    });
  });
}

/** Refuses every request at once with 413, without reading its body. */
const refuse = (req: IncomingMessage, res: ServerResponse) => {
  closeAfterAnswer(req, res);
  res.writeHead(413, { 'Content-Type': 'application/json' }).end('{"refused":true}');
};

describe('unread bodies: answers before the body ended', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      server.close();
    }
  });

  it('when a 2 MiB body is refused before it was read, by a client that reads only after sending it all, then it reads the whole answer, which says Connection: close, and the connection ends', async () => {
    const { server, port } = await serve(refuse);
    servers.push(server);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    // A client that reads nothing until its body is sent: a reset arriving
    // meanwhile would throw away the answer waiting in its buffer.
    socket.pause();
    socket.write(`POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: ${2 * MiB}\r\n\r\n`);
    const written = new Promise<void>((resolve) => socket.write(Buffer.alloc(2 * MiB, 7), () => resolve()));
    await Promise.race([written, once(socket, 'close')]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const outcome = collect(socket);
    socket.resume();
    const { text, closed } = await outcome;
    expect(text).to.match(/^HTTP\/1\.1 413 /);
    expect(text).to.match(/\r\nConnection: close\r\n/i);
    expect(text).to.contain('{"refused":true}');
    expect(closed).to.equal(true);
  });

  it('when a 10 KB body is refused before it was read, then the rest is dropped and the same connection answers the next request', async () => {
    let requests = 0;
    const { server, port } = await serve((req, res) => {
      requests += 1;
      if (req.method === 'POST') return refuse(req, res);
      res.end('second');
    });
    servers.push(server);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    const outcome = collect(socket, 1500);
    socket.write(`POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n${'b'.repeat(10_000)}`);
    socket.write('GET /next HTTP/1.1\r\nHost: x\r\n\r\n');
    const { text, reset } = await outcome;
    expect(reset).to.equal(false);
    expect(text).to.match(/^HTTP\/1\.1 413 /);
    expect(text).not.to.match(/Connection: close/i);
    expect(text).to.match(/HTTP\/1\.1 200 OK[\s\S]*second$/);
    expect(requests).to.equal(2);
    socket.destroy();
  });

  it('when the client hangs up before a detached body is read, then its reader, starting later, gets the error and nothing is thrown', async () => {
    let uncaught: unknown;
    const onUncaught = (err: unknown) => (uncaught = err);
    // Mocha's own handler would fail the test too; this one names the cause.
    process.prependListener('uncaughtException', onUncaught);
    let read: Promise<string> | undefined;
    const { server, port } = await serve((req) => {
      const body = detachableBody(req);
      // The reader is busy elsewhere (a PATCH waiting for its lease) for a while.
      read = new Promise((resolve) => setTimeout(resolve, 300)).then(async () => {
        try {
          for await (const _ of body) void _;
          return 'ended';
        } catch (err) {
          return `failed: ${(err as Error).message}`;
        }
      });
    });
    servers.push(server);
    try {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write(`PATCH /up HTTP/1.1\r\nHost: x\r\nContent-Length: ${MiB}\r\n\r\n${'b'.repeat(1000)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(read).not.to.equal(undefined);
      expect(await read).to.match(/^failed: /);
      expect(uncaught).to.equal(undefined);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
