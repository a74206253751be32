// Why complete downloads went uncounted, shown without any race left to
// chance: a store stream that reports its end some time after its last byte.
// A client that closes at the last byte (curl) then leaves before the
// response can finish. exactBody ends the body with its last byte instead.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import { promisify } from 'node:util';
import { expect } from 'chai';
import Koa from 'koa';
import { exactBody } from '../../src/downloads/body.js';
import { ObjectStoreError } from '../../src/storage/object-store.js';
import { eventually } from '../helpers/raw-upload.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A source that has all of `content` at once but says it has ended only after `endAfterMs`. */
function lateEnding(content: Buffer, endAfterMs: number): PassThrough {
  const source = new PassThrough();
  source.write(content);
  setTimeout(() => source.end(), endAfterMs).unref();
  return source;
}

/** Reads a stream to its end or its error. */
async function drain(stream: Readable): Promise<{ data: Buffer; error?: unknown }> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return { data: Buffer.concat(chunks) };
  } catch (error) {
    return { data: Buffer.concat(chunks), error };
  }
}

describe('download body: ended with its last byte', () => {
  const content = randomBytes(1024 * 1024);

  /** Serves `body()` with Content-Length to one curl download; reports whether the response finished. */
  async function serveToCurl(body: () => Readable): Promise<{ finished: boolean; closed: boolean }> {
    const seen = { finished: false, closed: false };
    const app = new Koa();
    app.silent = true;
    app.use((ctx) => {
      ctx.length = content.length;
      ctx.body = body();
      ctx.res.once('finish', () => (seen.finished = true));
      ctx.res.once('close', () => (seen.closed = true));
    });
    const server: Server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const { stdout } = await run('curl', ['-sS', '--fail', '-o', '/dev/null', '-w', '%{size_download}', `http://127.0.0.1:${port}/`]);
      expect(Number(stdout)).to.equal(content.length);
      // A response that closed without 'finish' never finishes after it.
      expect(await eventually(async () => seen.closed, (closed) => closed)).to.equal(true);
      return seen;
    } finally {
      server.closeAllConnections();
      server.close();
    }
  }

  it('when the store stream ends late and curl closes at the last byte, then a bare stream body never finishes (the cause)', async () => {
    expect(await serveToCurl(() => lateEnding(content, 300))).to.deep.equal({ finished: false, closed: true });
  });

  it('when the same happens with exactBody, then the response finishes (the fix)', async () => {
    expect(await serveToCurl(() => exactBody(lateEnding(content, 300), content.length))).to.deep.equal({ finished: true, closed: true });
  });

  it('when the source has all the bytes, then the body ends without waiting for the source to end', async () => {
    const source = new PassThrough();
    source.write(content);
    const body = exactBody(source, content.length);
    const { data, error } = await drain(body);
    expect(error).to.equal(undefined);
    expect(data.equals(content)).to.equal(true);
    expect(source.writableEnded).to.equal(false);
    source.end();
  });

  it('when the source sends more than promised, then the body stops at the promised length', async () => {
    const source = new PassThrough();
    source.end(Buffer.concat([content, Buffer.from('extra')]));
    const { data, error } = await drain(exactBody(source, content.length));
    expect(error).to.equal(undefined);
    expect(data.equals(content)).to.equal(true);
  });

  it('when the source ends short, then the body fails with ObjectStoreError', async () => {
    const source = new PassThrough();
    source.end(content.subarray(0, 1000));
    const { error } = await drain(exactBody(source, content.length));
    expect(error).to.be.instanceOf(ObjectStoreError);
    expect((error as Error).message).to.include(`${content.length - 1000} bytes short`);
  });

  it('when the source fails, then the body fails with ObjectStoreError carrying the cause', async () => {
    const source = new PassThrough();
    source.write(content.subarray(0, 1000));
    const cause = Object.assign(new Error('read EIO'), { code: 'EIO' });
    setTimeout(() => source.destroy(cause), 10);
    const { error } = await drain(exactBody(source, content.length));
    expect(error).to.be.instanceOf(ObjectStoreError);
    expect((error as Error).cause).to.equal(cause);
  });

  it('when the source closes before its end without an error, then the body fails with ObjectStoreError', async () => {
    const source = new PassThrough();
    source.write(content.subarray(0, 1000));
    setTimeout(() => source.destroy(), 10);
    const { error } = await drain(exactBody(source, content.length));
    expect(error).to.be.instanceOf(ObjectStoreError);
  });

  it('when the body is destroyed (the client left), then the source is destroyed and the error is not called a store failure', async () => {
    const source = new PassThrough();
    source.write(content.subarray(0, 1000));
    const body = exactBody(source, content.length);
    const gone = Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
    const errored = once(body, 'error');
    body.destroy(gone);
    expect((await errored)[0]).to.equal(gone);
    await sleep(10);
    expect(source.destroyed).to.equal(true);
  });

  it('when the file is empty, then the body ends when the source does', async () => {
    const source = new PassThrough();
    source.end();
    const { data, error } = await drain(exactBody(source, 0));
    expect(error).to.equal(undefined);
    expect(data.length).to.equal(0);
  });
});
