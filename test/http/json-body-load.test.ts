// The JSON body parser is imported with the first JSON body (src/http/json-body.ts).
// An import can fail like any file open (EMFILE when descriptors run out): that
// request fails, and the next one must import again rather than fail forever.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import { AppError } from '../../src/errors.js';
import { jsonBody } from '../../src/http/json-body.js';

describe('the JSON body parser, imported on first use', () => {
  let server: Server | undefined;
  afterEach(() => server?.close());

  it('when its import fails once (EMFILE), then that request fails and the next JSON body is parsed', async () => {
    let loads = 0;
    const loadParser = async () => {
      loads++;
      if (loads === 1) throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
      return import('@koa/bodyparser');
    };
    const app = new Koa();
    app.silent = true;
    app.use(jsonBody({ limit: '16kb', invalid: () => new AppError('invalid_json', 'not JSON'), timeoutMs: 5_000, loadParser }));
    app.use((ctx) => {
      ctx.body = { got: ctx.request.body };
    });
    server = createServer(app.callback()).listen(0, '127.0.0.1');
    await new Promise((resolve) => server!.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const post = () => fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' });
    expect((await post()).status, 'the request whose import failed').to.equal(500);
    const second = await post();
    expect(second.status, 'the next request').to.equal(200);
    expect(await second.json()).to.deep.equal({ got: { a: 1 } });
    expect(loads).to.equal(2);
  });
});
