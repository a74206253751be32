// Issue #7, hostile input: requests a broken or malicious client could send,
// one table row each (the request, the status and error code it must get),
// and after every row the same checks: nothing stored (no object, no temp
// file, no file row, no daily-quota count) unless the row expects a file,
// no 5xx, no X-Powered-By, no stack trace, database text or API key in a body.
// Requests go over raw sockets so every byte (lying lengths, CR/LF in part
// headers, unnormalised paths) reaches the server as written.
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { expect } from 'chai';
import { parse as parseDisposition } from 'content-disposition';
import { backends } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

// ---------------------------------------------------------------- raw HTTP

interface RawResponse {
  status: number;
  /** Header fields in the order received, names in lower case. */
  headers: [string, string][];
  body: Buffer;
  text: string;
  json: any;
}

const headerValues = (res: RawResponse, name: string) => res.headers.filter(([n]) => n === name).map(([, v]) => v);

interface RawOptions {
  /** After writing the request: wait for the answer (default), half-close the connection, cut it once the bytes are out, or at once. */
  then?: 'wait' | 'end' | 'cut' | 'cut at once';
  /** The answer to a HEAD request has no body. */
  head?: boolean;
}

function parseResponse(data: Buffer, head: boolean, closed: boolean): RawResponse | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = data.subarray(0, end).toString('latin1').split('\r\n');
  const headers = lines.map((line): [string, string] => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
  });
  const length = head ? 0 : Number(headers.find(([n]) => n === 'content-length')?.[1] ?? NaN);
  const body = data.subarray(end + 4);
  // Without a length the body runs to the close.
  if (!closed && !(body.length >= length)) return undefined;
  const text = body.toString('utf8');
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body, text, json };
}

/** Writes `request` as is on a new connection; resolves with the first response, or undefined if none came. */
function rawRequest(baseUrl: string, request: Buffer, { then = 'wait', head = false }: RawOptions = {}): Promise<RawResponse | undefined> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let data = Buffer.alloc(0);
    let settled = false;
    const settle = (res: RawResponse | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(res);
    };
    const timer = setTimeout(() => settle(parseResponse(data, head, true)), 10_000);
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      const res = parseResponse(data, head, false);
      if (res) settle(res);
    });
    socket.on('close', () => settle(parseResponse(data, head, true)));
    socket.write(request, () => {
      if (then === 'end') socket.end();
      if (then === 'cut at once') settle(undefined);
      // Long enough for the bytes to leave, then a hang-up.
      if (then === 'cut') setTimeout(() => settle(undefined), 50);
    });
  });
}

/**
 * Writes `first`, waits for its answer, then writes `second` on the same
 * connection, as a keep-alive client does. Resolves with both answers; the
 * second is undefined if the connection closed without one.
 */
function twoOnOneConnection(baseUrl: string, first: Buffer, second: Buffer): Promise<[RawResponse | undefined, RawResponse | undefined]> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let data = Buffer.alloc(0);
    let answers: RawResponse[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve([answers[0], answers[1]]);
    };
    const timer = setTimeout(done, 10_000);
    socket.on('error', () => {});
    socket.on('close', done);
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      const res = parseResponse(data, false, false);
      if (!res) return;
      answers = [...answers, res];
      data = Buffer.alloc(0);
      if (answers.length === 2) return done();
      socket.write(second);
    });
    socket.write(first);
  });
}

type Headers = [string, string | number][];

/** An HTTP/1.1 request, byte for byte; Content-Length is added when a body is given and no framing header is. */
function httpRequest(method: string, path: string, headers: Headers = [], body?: Buffer): Buffer {
  const all: Headers = [['Host', 'files.test'], ...headers];
  const framed = all.some(([n]) => /^(content-length|transfer-encoding)$/i.test(n));
  if (body && !framed) all.push(['Content-Length', body.length]);
  const head = `${method} ${path} HTTP/1.1\r\n${all.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), body ?? Buffer.alloc(0)]);
}

// ---------------------------------------------------------------- multipart, by hand

const B = 'hostile-boundary-7';
const BODY_TYPE = `multipart/form-data; boundary=${B}`;

/** A quoted-string, escaped as RFC 9110 says (busboy undoes it). */
const quoted = (s: string) => `"${s.replace(/["\\]/g, '\\$&')}"`;

/** RFC 8187 `UTF-8''...`, every byte outside attr-char percent-encoded. */
const extended = (s: string) =>
  `UTF-8''${[...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9!#$&+.^_`|~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('')}`;

/** One part; `disposition` is everything after `form-data; `, as UTF-8 (as browsers send it) or as the bytes given. */
function part(disposition: string | Buffer, content: Buffer | string = 'x', extraHeaders = 'Content-Type: application/octet-stream\r\n', boundary = B): Buffer {
  return Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; `),
    Buffer.from(disposition),
    Buffer.from(`\r\n${extraHeaders}\r\n`),
    Buffer.from(content),
    Buffer.from('\r\n'),
  ]);
}

const closing = (boundary = B) => Buffer.from(`--${boundary}--\r\n`);
const form = (...parts: Buffer[]) => Buffer.concat([...parts, closing()]);
const filePart = (filename: string, content: Buffer | string = 'x') => part(`name="file"; filename=${quoted(filename)}`, content);
const fieldPart = (name: string, value = 'v') => part(`name="${name}"`, value, '');

/** `count` small fields, as one buffer. */
const manyFields = (count: number) => Buffer.concat(Array.from({ length: count }, (_, i) => fieldPart(`f${i}`)));

/** Chunked transfer coding of `body`, in chunks of `size`. */
function chunked(body: Buffer, size = 100): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += size) {
    const chunk = body.subarray(i, i + size);
    out.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n'));
  }
  out.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(out);
}

// ---------------------------------------------------------------- cases

interface Ctx {
  t: TestServer;
  /** A fresh account of the case's own, on the roomy plan. */
  accountId: number;
  key: string;
  /** Another account, with one file the case must not be able to touch. */
  victim: { key: string; fileId: number; token: string };
}

interface HostileCase {
  /** Completes "when ...". */
  when: string;
  send(c: Ctx): Promise<RawResponse | undefined>;
  /** `no answer`: the connection may close without a response (a 400 is fine too). */
  status: number | 'no answer';
  /** The error code, where the answer is ours (Node answers some broken requests itself, without a body). */
  code?: string;
  /** The request must store one file: checks it; the runner then deletes it. */
  accepted?: (res: RawResponse, c: Ctx) => Promise<void>;
  /** More checks on the answer. */
  check?: (res: RawResponse, c: Ctx) => Promise<void>;
}

const auth = (key: string): [string, string] => ['Authorization', `Bearer ${key}`];

/** An upload with the given headers (no Authorization unless given) and body. */
const uploadWith = (c: Ctx, headers: Headers, body: Buffer, options?: RawOptions) =>
  rawRequest(c.t.server.url, httpRequest('POST', '/api/v1/files/upload', headers, body), options);

/** An authenticated upload of `body` as multipart/form-data with our boundary. */
const uploadBody = (c: Ctx, body: Buffer, headers: Headers = [['Content-Type', BODY_TYPE]], options?: RawOptions) =>
  uploadWith(c, [auth(c.key), ...headers], body, options);

const get = (c: Ctx, path: string, headers: Headers = [auth(c.key)], options?: RawOptions) =>
  rawRequest(c.t.server.url, httpRequest(options?.head ? 'HEAD' : 'GET', path, headers), options);

const GOOD_BODY = form(filePart('good.txt', 'good'));

// Authentication: every row sends a well-formed upload, so a key that got
// through would store a file.

/** A well-formed upload with these extra headers (and no Authorization unless among them). */
const uploadWithHeaders = (headers: (c: Ctx) => Headers) => (c: Ctx) => uploadWith(c, [...headers(c), ['Content-Type', BODY_TYPE]], GOOD_BODY);

/** A row whose Authorization header value must be refused as an invalid key. */
const invalidKey = (when: string, authorization: (c: Ctx) => string): HostileCase => ({
  when,
  send: uploadWithHeaders((c) => [['Authorization', authorization(c)]]),
  status: 401,
  code: 'invalid_api_key',
});

/** A row that carries the key anywhere but in Authorization: as good as no key. */
const keyElsewhere = (when: string, headers: (c: Ctx) => Headers): HostileCase => ({
  when,
  send: uploadWithHeaders(headers),
  status: 401,
  code: 'missing_api_key',
});

const swapCase = (s: string) => [...s].map((ch) => (ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase())).join('');

const keyCases: HostileCase[] = [
  { when: 'a valid key sends a well-formed upload (control row)', send: (c) => uploadBody(c, GOOD_BODY), status: 201, accepted: async (res) => void expect(res.json.size).to.equal(4) },
  keyElsewhere('the Authorization header is missing', () => []),
  keyElsewhere('the Authorization header is empty', () => [['Authorization', '']]),
  invalidKey('the header is "Bearer" alone', () => 'Bearer'),
  invalidKey('the key has one character more', (c) => `Bearer ${c.key}x`),
  invalidKey('the key has one character less', (c) => `Bearer ${c.key.slice(0, -1)}`),
  invalidKey('the key has its case changed', (c) => `Bearer ds_live_${swapCase(c.key.slice('ds_live_'.length))}`),
  invalidKey('the key is only the prefix', () => 'Bearer ds_live_'),
  invalidKey('the key is followed by a second word', (c) => `Bearer ${c.key} ${c.key}`),
  invalidKey('the key carries raw non-ASCII bytes', (c) => `Bearer ${c.key}\u00ff\u00fe`),
  invalidKey('the key is SQL', () => "Bearer x' OR '1'='1"),
  invalidKey('the key is 8 KB long', () => `Bearer ${'A'.repeat(8192)}`),
  invalidKey('the valid key comes with the Basic scheme', (c) => `Basic ${Buffer.from(`${c.key}:`).toString('base64')}`),
  invalidKey('the valid key comes with the Token scheme', (c) => `Token ${c.key}`),
  invalidKey('the valid key comes without a scheme', (c) => c.key),
  // Node's own limit on request headers (16 KB): its bare 431, before any of our code.
  { when: 'the Authorization header is 20 KB', send: uploadWithHeaders(() => [['Authorization', `Bearer ${'A'.repeat(20_000)}`]]), status: 431 },
  {
    when: 'the key was revoked by a rotation',
    send: async (c) => {
      await c.t.admin('POST', `/admin/accounts/${c.accountId}/keys`);
      return uploadBody(c, GOOD_BODY);
    },
    status: 401,
    code: 'invalid_api_key',
  },
  {
    when: 'the key is in the query string as api_key',
    send: (c) => rawRequest(c.t.server.url, httpRequest('POST', `/api/v1/files/upload?api_key=${c.key}`, [['Content-Type', BODY_TYPE]], GOOD_BODY)),
    status: 401,
    code: 'missing_api_key',
  },
  {
    when: 'the key is in the query string as access_token',
    send: (c) => rawRequest(c.t.server.url, httpRequest('POST', `/api/v1/files/upload?access_token=${c.key}`, [['Content-Type', BODY_TYPE]], GOOD_BODY)),
    status: 401,
    code: 'missing_api_key',
  },
  keyElsewhere('the key is in a cookie', (c) => [['Cookie', `api_key=${c.key}`]]),
  keyElsewhere('the key is in X-API-Key', (c) => [['X-API-Key', c.key]]),
  // Node keeps the first of duplicated Authorization headers, a proxy may act on the last: refused (issue 27).
  { when: 'a bad Authorization header is followed by a valid one', send: uploadWithHeaders((c) => [auth('ds_live_wrong'), auth(c.key)]), status: 400, code: 'repeated_header' },
  {
    when: 'the key of an account whose plan has no API is used',
    send: async (c) => {
      const free = await c.t.account('free');
      return uploadWithHeaders(() => [auth(free.apiKey)])(c);
    },
    status: 403,
    code: 'plan_without_api_access',
  },
];

/** The answer for a file id that does not exist, to compare another account's file with. */
const MISSING_ID = 999_999_999;

async function expectVictimIntact(c: Ctx) {
  const res = await get(c, `/api/v1/files/${c.victim.fileId}`, [auth(c.victim.key)]);
  expect(res?.status, "the other account's file").to.equal(200);
}

// File ids: never another account's file, never anything but a positive integer.
const idCases: HostileCase[] = ['GET', 'DELETE'].flatMap((method): HostileCase[] => {
  const send = (path: string) => (c: Ctx) => rawRequest(c.t.server.url, httpRequest(method, path, [auth(c.key)]));
  const invalid = (what: string, id: string): HostileCase => ({
    when: `${method} is sent for the id ${what} (${id})`,
    send: send(`/api/v1/files/${id}`),
    status: 400,
    code: 'invalid_file_id',
    check: async (_, c) => expectVictimIntact(c),
  });
  return [
    {
      when: `${method} is sent for another account's file_id`,
      send: (c) => send(`/api/v1/files/${c.victim.fileId}`)(c),
      status: 404,
      code: 'file_not_found',
      check: async (res, c) => {
        const missing = await send(`/api/v1/files/${MISSING_ID}`)(c);
        expect(res.body.equals(missing!.body), 'byte-identical to a missing id').to.equal(true);
        await expectVictimIntact(c);
      },
    },
    { when: `${method} is sent for a missing id`, send: send(`/api/v1/files/${MISSING_ID}`), status: 404, code: 'file_not_found' },
    invalid('negative', '-1'),
    invalid('zero', '0'),
    invalid('past 32 bits', '4294967297'),
    invalid('huge', '9'.repeat(40)),
    invalid('in exponent form', '1e3'),
    invalid('in hex', '0x1'),
    invalid('with a fraction', '1.0'),
    invalid('non-numeric', 'abc'),
    invalid('with a space', '%201'),
    invalid('with a NUL', '1%00'),
    invalid('in fullwidth digits', '%EF%BC%91'),
    invalid('with broken percent-encoding', '%E0%A4%A'),
    invalid('of dots', '..'),
    invalid('of URL-encoded dots', '%2e%2e'),
    invalid('of a URL-encoded ../', '..%2F'),
    invalid('of a URL-encoded ../stats', '%2e%2e%2fstats'),
    invalid('of a URL-encoded ..\\', '..%5C'),
    {
      when: `${method} is sent for a raw ../ path`,
      send: send('/api/v1/files/../stats'),
      status: 404,
      code: 'not_found',
      check: async (_, c) => expectVictimIntact(c),
    },
  ];
});

// Multipart bodies that are broken, oversized or lying about their size.
const multipartCases: HostileCase[] = [
  { when: 'the Content-Type is multipart without a boundary', send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', 'multipart/form-data']]), status: 400, code: 'invalid_multipart' },
  { when: 'the boundary is empty', send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', 'multipart/form-data; boundary=']]), status: 400, code: 'invalid_multipart' },
  { when: 'there is no Content-Type', send: (c) => uploadBody(c, GOOD_BODY, []), status: 400, code: 'invalid_multipart' },
  { when: 'the Content-Type is text/plain', send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', 'text/plain']]), status: 400, code: 'invalid_multipart' },
  { when: 'the Content-Type is multipart/mixed', send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', `multipart/mixed; boundary=${B}`]]), status: 400, code: 'invalid_multipart' },
  { when: 'the body uses another boundary than the header', send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', 'multipart/form-data; boundary=not-the-one']]), status: 400, code: 'invalid_multipart' },
  { when: 'the closing boundary is missing', send: (c) => uploadBody(c, filePart('open.txt', randomBytes(1000))), status: 400, code: 'invalid_multipart' },
  { when: 'the body is empty', send: (c) => uploadBody(c, Buffer.alloc(0)), status: 400, code: 'invalid_multipart' },
  { when: 'the body is only the closing boundary', send: (c) => uploadBody(c, closing()), status: 400, code: 'missing_file' },
  { when: 'there are two file parts', send: (c) => uploadBody(c, form(filePart('a.txt', randomBytes(500)), filePart('b.txt', 'b'))), status: 400, code: 'multiple_files' },
  { when: 'a file part has another name', send: (c) => uploadBody(c, form(part('name="document"; filename="a.txt"'))), status: 400, code: 'unexpected_file_part' },
  { when: 'the file part has no filename', send: (c) => uploadBody(c, form(fieldPart('file', 'just a field'))), status: 400, code: 'missing_file' },
  { when: 'the file part has an empty filename', send: (c) => uploadBody(c, form(part('name="file"; filename=""', 'x', ''))), status: 400, code: 'missing_file' },
  { when: 'a field named file follows the file part', send: (c) => uploadBody(c, form(filePart('a.txt'), fieldPart('file'))), status: 400, code: 'missing_file' },
  { when: '5000 small fields come before the file', send: (c) => uploadBody(c, form(manyFields(5000), filePart('late.txt'))), status: 400, code: 'too_many_parts' },
  // Refused at the first field after the file (options must come first), before any limit on fields is reached.
  { when: '5000 small fields follow the file', send: (c) => uploadBody(c, form(filePart('early.txt', randomBytes(2000)), manyFields(5000))), status: 400, code: 'field_after_file' },
  {
    when: 'a refused upload of 5000 fields is followed by another request on the same keep-alive connection',
    // The client has sent its whole body before the refusal: it may reuse
    // the connection, and its next request must be answered, not reset.
    send: async (c) => {
      const upload = httpRequest('POST', '/api/v1/files/upload', [auth(c.key), ['Content-Type', BODY_TYPE]], form(manyFields(5000), filePart('late.txt')));
      const [refusal, next] = await twoOnOneConnection(c.t.server.url, upload, httpRequest('GET', '/api/v1/stats', [auth(c.key)]));
      expect(refusal?.status).to.equal(400);
      expect(refusal?.json.error.code).to.equal('too_many_parts');
      return next;
    },
    status: 200,
  },
  // README: too_many_parts is "more than 50 fields or 60 parts".
  { when: '50 fields come with the file', send: (c) => uploadBody(c, form(manyFields(50), filePart('fifty.txt'))), status: 201, accepted: async (res) => void expect(res.json.filename).to.equal('fifty.txt') },
  { when: '51 fields come with the file', send: (c) => uploadBody(c, form(manyFields(51), filePart('fifty-one.txt'))), status: 400, code: 'too_many_parts' },
  {
    when: 'the form is 60 parts: 10 without a Content-Disposition, 49 fields and the file',
    send: (c) => uploadBody(c, form(...Array.from({ length: 10 }, () => Buffer.from(`--${B}\r\nX-Nothing: 1\r\n\r\nv\r\n`)), manyFields(49), filePart('sixty.txt'))),
    status: 201,
    accepted: async (res) => void expect(res.json.filename).to.equal('sixty.txt'),
  },
  {
    when: 'the form is 61 parts: 11 without a Content-Disposition, 49 fields and the file',
    send: (c) => uploadBody(c, form(...Array.from({ length: 11 }, () => Buffer.from(`--${B}\r\nX-Nothing: 1\r\n\r\nv\r\n`)), manyFields(49), filePart('sixty-one.txt'))),
    status: 400,
    code: 'too_many_parts',
  },
  {
    when: '61 parts without a Content-Disposition come before the file',
    send: (c) => uploadBody(c, form(...Array.from({ length: 61 }, () => Buffer.from(`--${B}\r\nX-Nothing: 1\r\n\r\nv\r\n`)), filePart('late.txt'))),
    status: 400,
    code: 'too_many_parts',
  },
  { when: 'the part header is a 100 KB Content-Disposition', send: (c) => uploadBody(c, form(part(`name="file"; filename="${'a'.repeat(100_000)}.txt"`))), status: 400, code: 'invalid_multipart' },
  { when: 'the part has 2000 header lines', send: (c) => uploadBody(c, form(part('name="file"; filename="a.txt"', 'x', 'X-Pad: 1\r\n'.repeat(2000)))), status: 400, code: 'invalid_multipart' },
  { when: 'a field is 1 MB long', send: (c) => uploadBody(c, form(fieldPart('big', 'v'.repeat(1_000_000)), filePart('after-big-field.txt', 'ok'))), status: 201, accepted: async (res) => void expect(res.json.filename).to.equal('after-big-field.txt') },
  { when: 'the file is empty', send: (c) => uploadBody(c, form(filePart('empty.txt', ''))), status: 201, accepted: async (res) => void expect(res.json.size).to.equal(0) },
  {
    when: 'Content-Length is shorter than the body (the multipart is cut; the rest is garbage Node answers itself)',
    send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', BODY_TYPE], ['Content-Length', GOOD_BODY.length - 12]]),
    status: 400,
  },
  {
    when: 'Content-Length covers the whole form and garbage follows in the same packet',
    // The request itself is complete and sound: it keeps its answer, and the
    // garbage after it (an unparsable next request) only closes the connection.
    send: (c) => uploadBody(c, Buffer.concat([GOOD_BODY, Buffer.from('garbage!\r\n\r\n')]), [['Content-Type', BODY_TYPE], ['Content-Length', GOOD_BODY.length]]),
    status: 201,
    accepted: async (res) => void expect(res.json.size).to.equal(4),
  },
  {
    when: 'Content-Length is longer than the body and the client half-closes',
    send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', BODY_TYPE], ['Content-Length', GOOD_BODY.length + 1000]], { then: 'end' }),
    status: 'no answer',
  },
  {
    when: 'Content-Length is longer than the body and the client hangs up',
    send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', BODY_TYPE], ['Content-Length', GOOD_BODY.length + 1000]], { then: 'cut' }),
    status: 'no answer',
  },
  {
    // The server is still authenticating and taking a quota slot when the
    // connection closes: the upload must notice, not wait for a body forever.
    when: 'the client sends the headers and half the body, then hangs up at once',
    send: (c) => uploadBody(c, GOOD_BODY.subarray(0, 60), [['Content-Type', BODY_TYPE], ['Content-Length', GOOD_BODY.length]], { then: 'cut at once' }),
    status: 'no answer',
  },
  {
    when: 'the client sends the whole upload, then hangs up at once',
    send: (c) => uploadBody(c, GOOD_BODY, [['Content-Type', BODY_TYPE]], { then: 'cut at once' }),
    status: 'no answer',
  },
  {
    when: 'the body is sent with Transfer-Encoding: chunked',
    send: (c) => uploadBody(c, chunked(form(filePart('chunked.bin', Buffer.alloc(5000, 7)))), [['Content-Type', BODY_TYPE], ['Transfer-Encoding', 'chunked']]),
    status: 201,
    accepted: async (res) => void expect(res.json.size).to.equal(5000),
  },
  {
    when: 'a chunk size is not hexadecimal',
    send: (c) => uploadBody(c, Buffer.concat([Buffer.from('zz\r\n'), GOOD_BODY, Buffer.from('\r\n0\r\n\r\n')]), [['Content-Type', BODY_TYPE], ['Transfer-Encoding', 'chunked']]),
    status: 400,
  },
  {
    when: 'both Content-Length and Transfer-Encoding are sent (request smuggling)',
    send: (c) => uploadBody(c, chunked(GOOD_BODY), [['Content-Type', BODY_TYPE], ['Content-Length', 10], ['Transfer-Encoding', 'chunked']]),
    status: 400,
  },
];

// Filenames: [what, how it is sent in the part header, the name kept (or the refusal)].
const refused = { status: 400, code: 'invalid_filename' } as const;
const filenameRows: [string, string | Buffer, string | { status: number; code: string }][] = [
  ['slashes', `filename=${quoted('dir/sub/name.txt')}`, 'name.txt'],
  ['a ../ traversal', `filename=${quoted('../../etc/passwd')}`, 'passwd'],
  ['a ..\\ traversal (RFC 8187)', `filename*=${extended('..\\..\\boot.ini')}`, 'boot.ini'],
  ['a raw Windows path, as old browsers send it', 'filename="C:\\fakepath\\photo.jpg"', 'photo.jpg'],
  ['..', `filename=${quoted('..')}`, refused],
  ['.', `filename=${quoted('.')}`, refused],
  ['a path ending in ..', `filename=${quoted('dir/..')}`, refused],
  ['a path ending in /', `filename=${quoted('dir/')}`, refused],
  ['only dots (...)', `filename=${quoted('...')}`, '...'],
  ['URL-encoded traversal, kept literally', `filename=${quoted('%2e%2e%2fx.txt')}`, '%2e%2e%2fx.txt'],
  ['a NUL (RFC 8187)', `filename*=${extended('a\u0000b.txt')}`, refused],
  ['a raw NUL, which breaks the part header', 'filename="a\u0000b.txt"', { status: 400, code: 'invalid_multipart' }],
  ['CR/LF (RFC 8187)', `filename*=${extended('a\r\nb.txt')}`, refused],
  ['a header injection (RFC 8187)', `filename*=${extended('x.txt\r\nContent-Type: text/html\r\nX-Injected: 1')}`, refused],
  // The raw CR/LF ends the Content-Disposition line: the quoted string never closes and busboy drops the part.
  ['a raw CR/LF, which breaks the part header', 'filename="a\r\nX-Injected: 1.txt"', { status: 400, code: 'missing_file' }],
  ['a tab', `filename=${quoted('a\tb.txt')}`, refused],
  ['DEL (RFC 8187)', `filename*=${extended('a\u007fb.txt')}`, refused],
  ['a C1 control (U+0085)', `filename=${quoted('a\u0085b.txt')}`, refused],
  ['double quotes', `filename=${quoted('say "hi".txt')}`, 'say "hi".txt'],
  ["quotes, percent, semicolon and equals", `filename=${quoted(`100% 'sure'; x=y.txt`)}`, `100% 'sure'; x=y.txt`],
  // Refused: it makes "invoice<U+202E>gpj.exe" display as "invoiceexe.jpg".
  ['a right-to-left override (U+202E)', `filename=${quoted('invoice\u202Egpj.exe')}`, refused],
  ['an NFD form', `filename=${quoted('cafe\u0301.txt')}`, 'caf\u00e9.txt'],
  ['an NFD form (RFC 8187)', `filename*=${extended('Ame\u0301lie.txt')}`, 'Am\u00e9lie.txt'],
  ['emoji and CJK', `filename=${quoted('📄 履歴書.pdf')}`, '📄 履歴書.pdf'],
  ['a byte that is not UTF-8', Buffer.from('filename="a\u00ffb.txt"', 'latin1'), 'a\ufffdb.txt'],
  // A leading byte-order mark is dropped (PGlite would drop it on reading the name back).
  ['a leading byte-order mark', `filename=${quoted('\ufeffbom.txt')}`, 'bom.txt'],
  ['two leading byte-order marks', `filename*=${extended('\ufeff\ufeffbom.txt')}`, 'bom.txt'],
  ['only a byte-order mark', `filename=${quoted('\ufeff')}`, refused],
  // Invisible (Default_Ignorable_Code_Point, issue 27): two names that look alike would differ.
  ['a zero-width no-break space inside', `filename=${quoted('a\ufeffb.txt')}`, refused],
  // Issue 38: separators that break a name over lines, format characters that hide text, blanks that draw nothing, marks with no base.
  ['a line separator (U+2028)', `filename=${quoted('a\u2028b.txt')}`, refused],
  ['a paragraph separator (U+2029)', `filename=${quoted('a\u2029b.txt')}`, refused],
  ['interlinear annotation marks (U+FFF9-FFFB)', `filename=${quoted('a\ufff9hidden\ufffab\ufffb.txt')}`, refused],
  ['only a Braille pattern blank (U+2800)', `filename=${quoted('\u2800')}`, refused],
  ['a Braille pattern blank inside', `filename=${quoted('a\u2800.txt')}`, refused],
  ['only a Hangul filler (U+3164)', `filename=${quoted('\u3164')}`, refused],
  ['only combining marks', `filename*=${extended('\u0301\u0302\u0303')}`, refused],
  ['a leading combining mark', `filename=${quoted('\u0336evil.txt')}`, refused],
  ['a combining mark on a letter that NFC cannot compose', `filename=${quoted('q\u0307.txt')}`, 'q\u0307.txt'],
  ['255 bytes', `filename=${quoted(`${'n'.repeat(251)}.txt`)}`, `${'n'.repeat(251)}.txt`],
  ['300 bytes', `filename=${quoted(`${'n'.repeat(296)}.txt`)}`, refused],
  ['300 bytes of multi-byte characters (RFC 8187)', `filename*=${extended(`${'é'.repeat(148)}.txt`)}`, refused],
  ['both filename and filename* (filename* wins)', `filename="fallback.txt"; filename*=${extended('réel.txt')}`, 'réel.txt'],
];

/** Downloads a stored file and checks it comes back, as an attachment under `name`, with headers that cannot hurt. */
async function expectSafeDownload(c: Ctx, link: string, name: string, content: Buffer) {
  const path = new URL(link).pathname;
  for (const head of [false, true]) {
    const res = (await get(c, path, [], { head }))!;
    expectSafeResponse(res, [c.key, c.victim.key]);
    expect(res.status).to.equal(200);
    const dispositions = headerValues(res, 'content-disposition');
    expect(dispositions, 'exactly one Content-Disposition').to.have.length(1);
    const disposition = dispositions[0]!;
    expect(disposition).to.not.match(/[\r\n\0]/);
    const parsed = parseDisposition(disposition);
    expect(parsed.type).to.equal('attachment');
    expect(parsed.parameters, 'filename* is always sent').to.have.property('filename*');
    expect(parsed.parameters.filename, 'decoded filename*').to.equal(name);
    expect(decodeURIComponent(parsed.parameters['filename*']!.replace(/^UTF-8''/i, '')), 'filename*, byte for byte').to.equal(name);
    expect(headerValues(res, 'content-type')).to.deep.equal(['application/octet-stream']);
    expect(headerValues(res, 'x-content-type-options')).to.deep.equal(['nosniff']);
    expect(headerValues(res, 'content-security-policy').join()).to.include("default-src 'none'");
    // Nothing smuggled in as a header of its own.
    expect(res.headers.map(([n]) => n)).to.not.include('x-injected');
    if (!head) expect(res.body.equals(content), 'the bytes come back').to.equal(true);
  }
}

const filenameCases: HostileCase[] = filenameRows.map(([what, disposition, outcome]): HostileCase => {
  const content = randomBytes(64);
  const send = (c: Ctx) => uploadBody(c, form(part(Buffer.concat([Buffer.from('name="file"; '), Buffer.from(disposition)]), content)));
  if (typeof outcome !== 'string') return { when: `the filename has ${what}`, send, ...outcome };
  return {
    when: `the filename has ${what}`,
    send,
    status: 201,
    accepted: async (res, c) => {
      expect(res.json.filename).to.equal(outcome);
      const info = await get(c, `/api/v1/files/${res.json.file_id}`);
      expect(info!.json.file.filename).to.equal(outcome);
      await expectSafeDownload(c, res.json.public_link, outcome, content);
    },
  };
});

// Files a browser would run if it rendered them, and download tokens.
const downloadCases: HostileCase[] = [
  ...[
    ['evil.html', 'text/html', '<!doctype html><script>alert(document.cookie)</script>'],
    ['evil.svg', 'image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'],
  ].map(([name, type, markup]): HostileCase => ({
    when: `${name} is uploaded as ${type} and downloaded`,
    send: (c) => uploadBody(c, form(part(`name="file"; filename="${name}"`, markup, `Content-Type: ${type}\r\n`))),
    status: 201,
    accepted: async (res, c) => expectSafeDownload(c, res.json.public_link, name!, Buffer.from(markup!)),
  })),
  ...(
    [
      ['unknown', () => randomBytes(16).toString('base64url')],
      ['truncated by one character', (tok: string) => tok.slice(0, -1)],
      ['truncated to 8 characters', (tok: string) => tok.slice(0, 8)],
      ['in lower case', (tok: string) => tok.toLowerCase()],
      ['in upper case', (tok: string) => tok.toUpperCase()],
      ['one character longer', (tok: string) => `${tok}A`],
      ['200 characters long', () => 'A'.repeat(200)],
      ['a URL-encoded traversal', () => '..%2F..%2Fapi%2Fv1%2Fstats'],
      ['a NUL', (tok: string) => `${tok}%00`],
    ] as const
  ).map(([what, mangle]): HostileCase => ({
    when: `the download token is ${what}`,
    send: (c) => {
      const token = mangle(c.victim.token);
      // Lower- or upper-casing a token can, rarely, leave it unchanged.
      if (token === c.victim.token) return get(c, `/download/${randomBytes(16).toString('base64url')}`, []);
      return get(c, `/download/${token}`, []);
    },
    status: 404,
    code: 'file_not_found',
    check: async (res) => {
      expect(headerValues(res, 'content-type').join()).to.match(/^application\/json/);
      expect(headerValues(res, 'content-disposition')).to.deep.equal([]);
    },
  })),
];

// ---------------------------------------------------------------- checks

const LEAKS = [/^\s*at /m, /\bSELECT\b/i, /\bINSERT\b/i, /prisma/i, /postgres/i, /pglite/i, /node_modules/, /\.ts:\d+/];

/** What every answer must respect, whatever was sent. */
function expectSafeResponse(res: RawResponse, secrets: string[]) {
  expect(res.status, 'never a 5xx').to.be.within(100, 499);
  expect(res.headers.map(([n]) => n)).to.not.include('x-powered-by');
  for (const secret of secrets) expect(res.text.includes(secret), 'an API key in the body').to.equal(false);
  if (res.status >= 400 && res.text) {
    for (const leak of LEAKS) expect(res.text, `error body matches ${leak}`).to.not.match(leak);
    expect(res.json, 'error bodies are JSON').to.be.an('object');
    expect(res.json.success).to.equal(false);
    expect(res.json.error.code).to.be.a('string');
    expect(res.json.error.message).to.be.a('string');
  }
}

interface Snapshot {
  objects: string[];
  rows: number;
  quota: number;
  pending: number;
  /** Uploads the server is still working on (UPLOAD_CONCURRENCY slots taken). */
  inFlight: number;
}

async function uploadsInFlight(t: TestServer): Promise<number> {
  const gauge = t.server.metrics.registry.getSingleMetric('dropstream_uploads_in_flight');
  return (await gauge!.get()).values[0]?.value ?? 0;
}

async function snapshot(c: Ctx): Promise<Snapshot> {
  const { prisma } = c.t.server.db;
  const quota = await prisma.dailyUpload.aggregate({ where: { accountId: c.accountId }, _sum: { count: true } });
  return {
    objects: (await c.t.objects()).sort(),
    rows: await prisma.file.count(),
    quota: quota._sum.count ?? 0,
    pending: await prisma.pendingObject.count(),
    inFlight: await uploadsInFlight(c.t),
  };
}

/**
 * How long clean-up after a hang-up may take before a test calls it a leak.
 * Generous: on a loaded 2-core machine an abort waited 2 s for its turn.
 * A state that is already right returns at once.
 */
const SETTLE_MS = 10_000;

/**
 * Waits until no upload of an earlier test is still in flight or pending, so
 * its late clean-up cannot show up as this test's leftover.
 */
async function settled(c: Ctx): Promise<void> {
  for (let waited = 0; waited < SETTLE_MS; waited += 20) {
    const { inFlight, pending } = await snapshot(c);
    if (inFlight === 0 && pending === 0 && (await c.t.tempFiles()).length === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits for the state to equal `expected` (clean-up after a hang-up is asynchronous), then asserts it. */
async function expectState(c: Ctx, expected: Snapshot) {
  let now = await snapshot(c);
  let temp = await c.t.tempFiles();
  for (let i = 0; i < SETTLE_MS / 20 && (JSON.stringify(now) !== JSON.stringify(expected) || temp.length > 0); i++) {
    await new Promise((r) => setTimeout(r, 20));
    now = await snapshot(c);
    temp = await c.t.tempFiles();
  }
  expect(now).to.deep.equal(expected);
  expect(temp, 'temp files').to.deep.equal([]);
}

function expectation(row: HostileCase): string {
  if (row.status === 'no answer') return 'no answer (or 400) and nothing is stored';
  const code = row.code ? ` ${row.code}` : '';
  return row.accepted ? `${row.status}${code}, and the file is sound` : `${row.status}${code} and nothing is stored`;
}

const tables: [string, HostileCase[]][] = [
  ['API keys', keyCases],
  ['file ids', idCases],
  ['multipart bodies', multipartCases],
  ['filenames', filenameCases],
  ['downloads', downloadCases],
];

for (const backend of backends) {
  describe(`hostile input (${backend})`, () => {
    let t: TestServer;
    let victim: Ctx['victim'];

    before(async () => {
      t = await sharedServer(backend);
      const { apiKey } = await t.account();
      const body = form(filePart('victim.txt', 'private'));
      const res = await rawRequest(t.server.url, httpRequest('POST', '/api/v1/files/upload', [auth(apiKey), ['Content-Type', BODY_TYPE]], body));
      expect(res?.status).to.equal(201);
      victim = { key: apiKey, fileId: res!.json.file_id, token: String(res!.json.public_link).split('/').pop()! };
    });

    for (const [table, rows] of tables) {
      describe(table, () => {
        for (const row of rows) {
          it(`when ${row.when}, then ${expectation(row)}`, async () => {
            const { accountId, apiKey } = await t.account();
            const c: Ctx = { t, accountId, key: apiKey, victim };
            await settled(c);
            const before = await snapshot(c);
            const res = await row.send(c);

            if (row.status === 'no answer') {
              if (res) expect(res.status).to.equal(400);
            } else {
              expect(res, 'an answer').to.not.equal(undefined);
              expect(res!.status, res!.text).to.equal(row.status);
              if (row.code) expect(res!.json?.error?.code).to.equal(row.code);
            }
            if (res) expectSafeResponse(res, [c.key, victim.key]);
            if (res && row.check) await row.check(res, c);

            if (!row.accepted) {
              await expectState(c, before);
              return;
            }
            const objects = (await t.objects()).sort();
            expect(objects.filter((o) => !before.objects.includes(o)), 'one new object').to.have.length(1);
            await expectState(c, { ...before, objects, rows: before.rows + 1, quota: before.quota + 1 });
            await row.accepted(res!, c);
            const deleted = await rawRequest(t.server.url, httpRequest('DELETE', `/api/v1/files/${res!.json.file_id}`, [auth(c.key)]));
            expect(deleted?.status).to.equal(200);
            // The quota counts uploads, not files kept.
            await expectState(c, { ...before, quota: before.quota + 1 });
          });
        }
      });
    }

    it('when all of that is over, then the server still answers and the victim file is intact', async () => {
      const health = await rawRequest(t.server.url, httpRequest('GET', '/healthz'));
      expect(health?.status).to.equal(200);
      const { accountId, apiKey } = await t.account();
      await expectVictimIntact({ t, accountId, key: apiKey, victim });
    });
  });
}
