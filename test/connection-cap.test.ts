// The global connection cap (src/connection-cap.ts) and its default from the
// open-files limit (src/open-files.ts), issue 38.
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import { loadConfig } from '../src/config.js';
import { capConnections, type ShedReason } from '../src/connection-cap.js';
import { AppError } from '../src/errors.js';
import { jsonBody } from '../src/http/json-body.js';
import { createListener, drain, listen } from '../src/listener.js';
import { defaultMaxConnections, openFilesLimit } from '../src/open-files.js';
import { eventually } from './helpers/raw-upload.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max processes             63432                63432                processes
Max open files            400                  4096                 files
Max locked memory         8388608              8388608              bytes
`;

describe('open-files limit', () => {
  it('when /proc/self/limits is read, then the soft limit on open files is the one taken, and MAX_CONNECTIONS defaults to half of it less a reserve of 64', () => {
    const limit = openFilesLimit(() => LIMITS);
    expect(limit).to.deep.equal({ soft: 400, source: 'proc' });
    expect(defaultMaxConnections(limit)).to.equal(168);
    expect(defaultMaxConnections({ soft: 1024, source: 'proc' })).to.equal(480);
  });

  it('when the limit is unlimited, then there is no cap; when it cannot be read, then 1024 is assumed', () => {
    const unlimited = openFilesLimit(() => LIMITS.replace(/400 {18}4096 {17}/, 'unlimited            unlimited            '));
    expect(unlimited).to.deep.equal({ soft: Infinity, source: 'proc' });
    expect(defaultMaxConnections(unlimited)).to.equal(0);
    const unreadable = openFilesLimit(() => {
      throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
    });
    expect(unreadable).to.deep.equal({ soft: 1024, source: 'assumed' });
  });

  it('when this process runs on Linux, then its own limit is read (not assumed)', () => {
    expect(openFilesLimit().source).to.equal('proc');
  });

  it('when MAX_CONNECTIONS is unset, then the config leaves it to the start; 0 turns the cap off; a negative value stops start', () => {
    expect(loadConfig({}).maxConnections).to.equal(undefined);
    expect(loadConfig({ MAX_CONNECTIONS: '0' }).maxConnections).to.equal(0);
    expect(loadConfig({ MAX_CONNECTIONS: '500' }).maxConnections).to.equal(500);
    expect(() => loadConfig({ MAX_CONNECTIONS: '-1' })).to.throw(/MAX_CONNECTIONS/);
  });
});

describe('connection cap', () => {
  let server: Server;
  let url: URL;
  const sockets: Socket[] = [];
  const shed: ShedReason[] = [];
  const episodes: string[] = [];
  /** Requests to /hold wait here until released. */
  let release: () => void = () => {};
  let held = new Promise<void>((r) => (release = r));
  let holding = 0;

  beforeEach(async () => {
    shed.length = 0;
    episodes.length = 0;
    held = new Promise<void>((r) => (release = r));
    holding = 0;
    server = createListener((req, res) => {
      if (req.url === '/hold') {
        holding += 1;
        void held.then(() => res.end('held'));
      }
      else res.end('ok');
    }, { headersSeconds: 30, idleSeconds: 30 });
    capConnections(server, 3, {
      onShed: (reason) => shed.push(reason),
      onFull: () => episodes.push('full'),
      onEased: (counts) => episodes.push(`eased ${counts.idle_closed}/${counts.new_refused}`),
    });
    url = new URL(await listen(server, 0, '127.0.0.1'));
  });
  afterEach(async () => {
    release();
    for (const socket of sockets.splice(0)) socket.destroy();
    await drain(server, 1000);
  });

  /** A connection; `closed` tells whether the server has closed it. */
  const open = () =>
    new Promise<{ socket: Socket; closed: () => boolean }>((resolve) => {
      let closed = false;
      const socket = connect(Number(url.port), url.hostname);
      sockets.push(socket);
      socket.on('error', () => {});
      socket.once('close', () => (closed = true));
      socket.once('connect', () => resolve({ socket, closed: () => closed }));
    });
  /** Sends a request to /hold on `socket`, which the server answers only on release(). */
  const hold = (socket: Socket) => socket.write('GET /hold HTTP/1.1\r\nHost: x\r\n\r\n');

  it('when the cap is reached and a new connection comes, then the oldest idle one is closed for it, and the others and the new one stay open', async () => {
    const first = await open();
    const second = await open();
    const third = await open();
    const fourth = await open();
    expect(await eventually(async () => first.closed(), (c) => c), 'the oldest').to.equal(true);
    expect([second, third, fourth].map((c) => c.closed())).to.deep.equal([false, false, false]);
    expect(shed).to.deep.equal(['idle_closed']);
    expect(episodes).to.deep.equal(['full']);
  });

  it('when every connection at the cap has a request in progress, then a new one is closed as it comes, and the requests finish', async () => {
    const busy = await Promise.all([open(), open(), open()]);
    const answers = busy.map(({ socket }) => new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (d) => (text += d));
      socket.on('data', () => text.endsWith('held') && resolve(text));
    }));
    for (const { socket } of busy) hold(socket);
    // The server has the three requests in progress before the fourth connection comes.
    expect(await eventually(async () => holding, (n) => n === 3)).to.equal(3);
    const late = await open();
    expect(await eventually(async () => late.closed(), (c) => c), 'the newcomer').to.equal(true);
    expect(shed).to.deep.equal(['new_refused']);
    release();
    for (const answer of answers) expect(await answer).to.match(/held$/);
  });

  it('when the connections fall below nine tenths of the cap after shedding, then the episode ends once, with its counts', async () => {
    const all = [await open(), await open(), await open(), await open()];
    await eventually(async () => shed.length, (n) => n === 1);
    for (const { socket } of all) socket.destroy();
    expect(await eventually(async () => episodes.length, (n) => n === 2)).to.equal(2);
    expect(episodes).to.deep.equal(['full', 'eased 1/0']);
  });
});

describe('connection cap, connections waiting on their client\'s JSON body (issue 50)', () => {
  let server: Server;
  let url: URL;
  const sockets: Socket[] = [];
  const shed: ShedReason[] = [];
  /** Requests that reached the JSON body's reader. */
  let reading = 0;

  beforeEach(async () => {
    shed.length = 0;
    reading = 0;
    const app = new Koa();
    // A shed connection's body reader fails with the 400 below; nothing to print.
    app.silent = true;
    app.use(async (ctx, next) => {
      if (ctx.path !== '/json') return void (ctx.body = 'ok');
      reading += 1;
      await next();
    });
    // A deadline far away: what frees a place here is the cap, not BODY_TIMEOUT.
    app.use(jsonBody({ limit: '16kb', invalid: () => new AppError('invalid_json', 'not JSON'), timeoutMs: 600_000 }));
    app.use((ctx) => void (ctx.body = 'read'));
    server = createListener(app.callback(), { headersSeconds: 30, idleSeconds: 30 });
    capConnections(server, 3, { onShed: (reason) => shed.push(reason), onFull: () => {}, onEased: () => {} });
    url = new URL(await listen(server, 0, '127.0.0.1'));
  });
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await drain(server, 1000);
  });

  /** A connection that sends a JSON POST announcing 100 bytes and sends 10 of them; `closed` tells whether the server closed it. */
  const slowBody = () =>
    new Promise<{ closed: () => boolean }>((resolve) => {
      let closed = false;
      const socket = connect(Number(url.port), url.hostname);
      sockets.push(socket);
      socket.on('error', () => {});
      socket.once('close', () => (closed = true));
      socket.once('connect', () => {
        socket.write('POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":     ');
        resolve({ closed: () => closed });
      });
    });

  it('when every connection at the cap waits on its client for a JSON body, then a new one closes the oldest of them and is answered', async () => {
    const first = await slowBody();
    const others = [await slowBody(), await slowBody()];
    expect(await eventually(async () => reading, (n) => n === 3), 'bodies being read').to.equal(3);
    const res = await fetch(new URL('/ok', url));
    expect(await res.text()).to.equal('ok');
    expect(await eventually(async () => first.closed(), (c) => c), 'the oldest').to.equal(true);
    expect(others.map((c) => c.closed())).to.deep.equal([false, false]);
    expect(shed).to.deep.equal(['body_waiting_closed']);
  });
});
