// A PATCH refused before its body is read (here: a wrong Upload-Offset with
// 64 MiB announced) is answered at once and its connection closed with a
// lingering close (src/http/unread-body.ts): the answer says
// `Connection: close`, the client reads all of it (no reset in its face),
// and the connection ends instead of carrying another request.
import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { create } from '../helpers/tus.js';

const MiB = 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 7);

interface RawExchange {
  /** Everything the server sent. */
  text: string;
  /** Body bytes written before the answer arrived. */
  sentBeforeAnswer: number;
  /** A socket error, and how much of the server's bytes had arrived by then. */
  error?: { code: string; textLength: number };
  /** Milliseconds from the answer's head to the connection's close. */
  closedAfterMs?: number;
}

/**
 * Sends `head` and then a body of `bodyLength` bytes as fast as the
 * connection takes it, reading nothing for the first `busyMs` (a client busy
 * sending, as most are: the answer waits in its socket meanwhile), stopping
 * when the answer's head arrives; then sends `next` on the same connection,
 * which a server that reused it would answer.
 */
function exchange(port: number, head: string, bodyLength: number, next: string, busyMs: number): Promise<RawExchange> {
  return new Promise((resolve) => {
    let text = '';
    let sent = 0;
    let answeredAt: number | undefined;
    let sentBeforeAnswer = 0;
    let error: RawExchange['error'];
    const socket: Socket = connect(port, '127.0.0.1', () => {
      socket.pause();
      setTimeout(() => socket.resume(), busyMs);
      socket.write(head);
      const pump = () => {
        while (answeredAt === undefined && sent < bodyLength) {
          sent += CHUNK.length;
          if (!socket.write(CHUNK)) return void socket.once('drain', pump);
        }
      };
      pump();
    });
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (answeredAt === undefined && text.includes('\r\n\r\n')) {
        answeredAt = Date.now();
        sentBeforeAnswer = sent;
        // The next request, on the same connection: it must not be answered.
        socket.write(next);
      }
    });
    socket.on('end', () => socket.end());
    // Bytes still in flight when the server lets go after its grace can end in a reset: it must come after the answer.
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= { code: err.code ?? err.message, textLength: text.length }));
    socket.on('close', () => resolve({ text, sentBeforeAnswer, error, closedAfterMs: answeredAt ? Date.now() - answeredAt : undefined }));
    setTimeout(() => socket.destroy(), 10_000).unref();
  });
}

describe('a tus PATCH refused before its body is read', function () {
  this.timeout(60_000);
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite');
  });
  after(async () => {
    await t.close();
  });

  it('when a PATCH with a wrong Upload-Offset announces 64 MiB, then the client reads the whole 409 (Connection: close, Upload-Offset) without a reset, and the server ends the connection instead of reusing it', async () => {
    const { apiKey } = await t.account();
    const path = (await create(t.server.url, apiKey, { length: 64 * MiB })).headers.get('location')!;
    const head = [
      `PATCH ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      `Authorization: Bearer ${apiKey}`,
      'Tus-Resumable: 1.0.0',
      'Content-Type: application/offset+octet-stream',
      'Upload-Offset: 5',
      `Content-Length: ${64 * MiB}`,
      'Connection: keep-alive',
      '',
      '',
    ].join('\r\n');
    const next = `HEAD ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${apiKey}\r\nTus-Resumable: 1.0.0\r\n\r\n`;
    const result = await exchange(Number(new URL(t.server.url).port), head, 64 * MiB, next, 300);

    expect(result.text, `the answer (socket error: ${result.error?.code})`).to.match(/^HTTP\/1\.1 409 /);
    // The server closed the connection: within the lingering close's grace (1 s), with slack for a loaded machine.
    expect(result.closedAfterMs).to.be.below(3000);
    // The answer waited 300 ms in the client's socket: a close without lingering resets the
    // connection under it, and the client reads ECONNRESET instead of the answer. Whatever the
    // client still had in flight may meet a reset after the grace, but only once the whole answer was in.
    if (result.error) expect(result.error.textLength, `${result.error.code} before the answer was read`).to.equal(result.text.length);
    const end = result.text.indexOf('\r\n\r\n');
    const headers = result.text.slice(0, end + 2);
    const body = result.text.slice(end + 4);
    expect(headers).to.match(/^HTTP\/1\.1 409 /);
    expect(headers, headers).to.match(/\r\nConnection: close\r\n/i);
    expect(headers).to.match(/\r\nUpload-Offset: 0\r\n/i);
    const length = Number(/\r\nContent-Length: (\d+)/i.exec(headers)?.[1]);
    expect(Buffer.byteLength(body, 'latin1'), 'the whole answer arrived').to.equal(length);
    expect(JSON.parse(body).error.code).to.equal('upload_offset_mismatch');
    // Only one answer: the HEAD sent after it on the same connection was not read as a request.
    expect(result.text.match(/HTTP\/1\.1 /g)).to.have.length(1);
    // Refused before reading: far less than the 64 MiB announced went out before the answer.
    expect(result.sentBeforeAnswer).to.be.below(16 * MiB);
  });
});
