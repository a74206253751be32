// `dropstream upload` and `dropstream download`: the public API from the
// command line. Both stream (the file is never held in memory), print one
// line on stdout on success (the link, the saved path) so scripts can capture
// it, and one line on stderr on failure. The API key is never printed.
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { link, lstat, rename, rm, stat, unlink } from 'node:fs/promises';
import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { basename, dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { decodeExtended, parse as parseDisposition } from 'content-disposition';
import { CliError } from './admin-client.js';
import { createProgress } from './progress.js';
import { RESUMABLE_THRESHOLD, resumableUpload } from './resumable-upload.js';

export const TRANSFER_USAGE = `  dropstream upload <path> [--server URL] [--key KEY] [--progress] [--resumable | --plain]
  dropstream download <link> [-o PATH] [--force] [--progress]`;

/**
 * Where upload sends without --server: DROPSTREAM_SERVER, else the server's
 * own settings as `serve` reads them (PUBLIC_URL, else http://localhost:$PORT),
 * as the admin commands follow ADMIN_PORT. An empty variable counts as unset.
 */
const serverFrom = (env: NodeJS.ProcessEnv) => env.DROPSTREAM_SERVER || env.PUBLIC_URL || `http://localhost:${env.PORT || 3000}`;
/** A connection with no traffic for this long is given up. */
const IDLE_TIMEOUT_MS = 60_000;
/** Error bodies are small JSON; never read more than this of one. */
const ERROR_BODY_LIMIT = 64 * 1024;

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code;

/** Server-controlled text, made safe for our one-line error format. */
const oneLine = (text: string) => text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();

function httpUrl(value: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`${what} is not a URL: ${oneLine(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`${what} must be an http or https URL`);
  return url;
}

/** An API path under the server URL (which may have a path of its own, behind a proxy). */
const apiUrl = (server: URL, path: string) => new URL(`${server.href.replace(/\/+$/, '')}${path}`);

function startRequest(url: URL, options: http.RequestOptions): ClientRequest {
  const req = (url.protocol === 'https:' ? https : http).request(url, options);
  req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new CliError(`no response from ${url.origin} for ${IDLE_TIMEOUT_MS / 1000} s`)));
  return req;
}

function responseOf(req: ClientRequest): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    req.once('response', resolve);
    req.on('error', reject);
  });
}

async function readBody(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    length += chunk.length;
    if (length > ERROR_BODY_LIMIT) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `<status> <code>: <message>` from the API's error body, or the status text when the body is not ours (a proxy's page). */
function responseError(status: number, body: string): CliError {
  let error: { code?: unknown; message?: unknown } | undefined;
  try {
    error = JSON.parse(body)?.error;
  } catch {
    error = undefined;
  }
  if (typeof error?.code === 'string') {
    return new CliError(oneLine(`${status} ${error.code}: ${typeof error.message === 'string' ? error.message : ''}`));
  }
  return new CliError(`${status} ${http.STATUS_CODES[status] ?? 'unexpected response'}`);
}

function networkError(err: unknown, url: URL): CliError {
  if (err instanceof CliError) return err;
  return new CliError(`connection to ${url.origin} failed (${errno(err) ?? oneLine((err as Error).message)})`);
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    (err) => (errno(err) === 'ENOENT' ? false : Promise.reject(err)),
  );
}

const refuseOverwrite = (path: string) => new CliError(`${path} already exists; pass --force to overwrite it`);

// ---- upload ----

/** The multipart/form-data framing around the file's bytes: one part named `file`. */
export function multipartFraming(filename: string): { contentType: string; head: Buffer; tail: Buffer } {
  // CR or LF would break the framing; the server refuses control characters anyway.
  if (/[\u0000-\u001f\u007f]/.test(filename)) throw new CliError(`cannot upload ${JSON.stringify(filename)}: the name has control characters`);
  const boundary = `dropstream-${randomBytes(16).toString('hex')}`;
  // Raw UTF-8 in a quoted string, as browsers and curl send it (the server decodes part names as UTF-8).
  const quoted = filename.replace(/[\\"]/g, '\\$&');
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  return { contentType: `multipart/form-data; boundary=${boundary}`, head: Buffer.from(head, 'utf8'), tail: Buffer.from(`\r\n--${boundary}--\r\n`) };
}

async function regularFileSize(path: string): Promise<number> {
  const info = await stat(path).catch((err: unknown) => {
    throw new CliError(`cannot read ${path} (${errno(err) ?? (err as Error).message})`);
  });
  if (!info.isFile()) throw new CliError(`${path} is not a regular file`);
  return info.size;
}

/**
 * The server hung up while we were sending. It closes the connection when it
 * refuses an upload early (bad key, over a limit), and its answer can be lost
 * with it: Node drops a response still unread when a write fails. So ask
 * again, with a request that has no body.
 */
async function whyRefused(server: URL, key: string, size: number): Promise<CliError | undefined> {
  const req = startRequest(apiUrl(server, '/api/v1/stats'), { headers: { Authorization: `Bearer ${key}` } });
  req.end();
  try {
    const res = await responseOf(req);
    const body = await readBody(res);
    if (res.statusCode !== 200) return responseError(res.statusCode ?? 0, body);
    const max: unknown = JSON.parse(body)?.limits?.max_file_size;
    if (typeof max === 'number' && size > max) return new CliError(`the server closed the connection: the file (${size} bytes) is over the plan's max_file_size (${max} bytes)`);
  } catch {
    // The question failing tells us nothing more than the upload failing.
  }
  return undefined;
}

async function upload(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { server: { type: 'string' }, key: { type: 'string' }, progress: { type: 'boolean' }, resumable: { type: 'boolean' }, plain: { type: 'boolean' } },
  });
  const [path, ...extra] = positionals;
  if (!path || extra.length > 0 || (values.resumable && values.plain)) {
    throw new CliError('usage: dropstream upload <path> [--server URL] [--key KEY] [--progress] [--resumable | --plain]');
  }
  const server = httpUrl(values.server || serverFrom(env), '--server');
  const key = values.key || env.DROPSTREAM_API_KEY;
  if (!key) throw new CliError('no API key: pass --key or set DROPSTREAM_API_KEY');
  const size = await regularFileSize(path);
  // Large files go resumable (tus): a cut connection costs a retry, not the upload.
  if (values.resumable || (!values.plain && size >= RESUMABLE_THRESHOLD)) {
    const base = apiUrl(server, '');
    const link = await resumableUpload({
      server: base.href.replace(/\/+$/, ''),
      key,
      path,
      size,
      showProgress: values.progress === true || process.stderr.isTTY === true,
      responseError,
      networkError: (err) => networkError(err, base),
    });
    process.stdout.write(`${link}\n`);
    return;
  }
  const { contentType, head, tail } = multipartFraming(basename(path));
  const url = apiUrl(server, '/api/v1/files/upload');

  const progress = createProgress({ enabled: values.progress === true || process.stderr.isTTY === true, total: size });
  const req = startRequest(url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': contentType, 'Content-Length': head.length + size + tail.length },
  });
  const answered = responseOf(req).then(async (res) => ({ status: res.statusCode ?? 0, body: await readBody(res) }));
  // The server may answer before it has read the body (a bad key, a file over
  // the plan's limit): then stop sending, rather than upload the rest for nothing.
  const stop = new AbortController();
  let sent = false;
  answered.then(() => sent || stop.abort(), () => {});
  const frame = async function* (file: AsyncIterable<Buffer>) {
    yield head;
    yield* file;
    yield tail;
  };
  const file = createReadStream(path, size > 0 ? { end: size - 1 } : {});
  const sending = pipeline(file, progress.counter, frame, req, { signal: stop.signal }).then(() => {
    sent = true;
  });
  const [sendResult, answer] = await Promise.allSettled([sending, answered]);
  progress.finish();

  if (answer.status === 'rejected') {
    const err = sendResult.status === 'rejected' ? sendResult.reason : answer.reason;
    if ((err as NodeJS.ErrnoException).path === path) throw new CliError(`cannot read ${path} (${errno(err)})`);
    if (errno(err) === 'EPIPE' || errno(err) === 'ECONNRESET') throw (await whyRefused(server, key, size)) ?? networkError(err, url);
    throw networkError(err, url);
  }
  const { status, body } = answer.value;
  let link: unknown;
  try {
    link = JSON.parse(body)?.public_link;
  } catch {
    link = undefined;
  }
  if (status !== 201 || typeof link !== 'string') throw responseError(status, body);
  process.stdout.write(`${link}\n`);
}

// ---- download ----

/** A name that is safe to create in the current folder: the last path segment, without control characters. */
export function safeBasename(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const last = (name.split(/[/\\]/).pop() ?? '').replace(/[\u0000-\u001f\u007f-\u009f]/g, '').trim();
  return last === '' || last === '.' || last === '..' ? undefined : last;
}

/** The file name a response suggests: `filename*` (UTF-8) when it decodes, else `filename`; sanitised to a basename. */
export function filenameFromDisposition(header: string | undefined): string | undefined {
  if (!header) return undefined;
  let parameters: Record<string, string>;
  try {
    parameters = parseDisposition(header, { extended: false }).parameters;
  } catch {
    return undefined;
  }
  const extended = parameters['filename*'] === undefined ? undefined : decodeExtended(parameters['filename*']);
  return safeBasename(extended) ?? safeBasename(parameters.filename);
}

/** Moves the finished temp file into place; without `force`, never replaces an existing file (even one created meanwhile). */
async function place(temp: string, dest: string, force: boolean): Promise<void> {
  if (force) return rename(temp, dest);
  try {
    // link() fails with EEXIST instead of replacing, atomically.
    await link(temp, dest);
  } catch (err) {
    if (errno(err) === 'EEXIST') throw refuseOverwrite(dest);
    // A file system without hard links: check, then rename.
    if (await exists(dest)) throw refuseOverwrite(dest);
    return rename(temp, dest);
  }
  await unlink(temp);
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}

async function download(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { output: { type: 'string', short: 'o' }, force: { type: 'boolean' }, progress: { type: 'boolean' } },
  });
  const [link, ...extra] = positionals;
  if (!link || extra.length > 0) throw new CliError('usage: dropstream download <link> [-o PATH] [--force] [--progress]');
  const url = httpUrl(link, 'the link');
  const force = values.force === true;

  // -o names the file, or a folder to save the server's file name in.
  const output = values.output;
  const intoFolder = output === undefined || (await isDirectory(output));
  if (output !== undefined && !intoFolder && /[/\\]$/.test(output)) throw new CliError(`no such folder: ${output}`);
  let dest = intoFolder ? undefined : resolve(output!);
  // Before connecting, when we already know the name.
  if (dest && !force && (await exists(dest))) throw refuseOverwrite(dest);

  const req = startRequest(url, { method: 'GET' });
  req.end();
  let res: IncomingMessage;
  try {
    res = await responseOf(req);
  } catch (err) {
    throw networkError(err, url);
  }
  if (res.statusCode !== 200) throw responseError(res.statusCode ?? 0, await readBody(res).catch(() => ''));

  if (!dest) {
    const name = filenameFromDisposition(res.headers['content-disposition']);
    if (!name) {
      res.destroy();
      throw new CliError('the server did not name the file; pass -o PATH');
    }
    dest = resolve(output ?? '.', name);
  }
  if (!force && (await exists(dest))) {
    // Hanging up mid-response: the server does not count it as a download.
    res.destroy();
    throw refuseOverwrite(dest);
  }

  const lengthHeader = res.headers['content-length'];
  const total = lengthHeader && /^[0-9]+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
  const progress = createProgress({ enabled: values.progress === true || process.stderr.isTTY === true, total });
  // Same folder, so the rename is atomic; a name of our own, so a long file name cannot make it too long.
  const temp = join(dirname(dest), `.dropstream-${randomBytes(8).toString('hex')}.part`);
  // Ctrl-C mid-download: stop, and remove the temp file on the way out.
  const interrupt = new AbortController();
  const onInterrupt = () => interrupt.abort();
  process.once('SIGINT', onInterrupt);
  try {
    await pipeline(res, progress.counter, createWriteStream(temp, { flags: 'wx' }), { signal: interrupt.signal });
    if (total !== undefined && progress.bytes() !== total) throw new CliError(`the download ended after ${progress.bytes()} of ${total} bytes`);
    await place(temp, dest, force);
  } catch (err) {
    await rm(temp, { force: true });
    if (interrupt.signal.aborted) throw new CliError('interrupted');
    if (err instanceof CliError) throw err;
    if ((err as NodeJS.ErrnoException).path !== undefined || (err as NodeJS.ErrnoException).syscall === 'rename') {
      throw new CliError(`cannot write ${dest} (${errno(err) ?? (err as Error).message})`);
    }
    throw networkError(err, url);
  } finally {
    process.off('SIGINT', onInterrupt);
    progress.finish();
  }
  process.stdout.write(`${dest}\n`);
}

/** Runs `upload` or `download` with the arguments after the command name. */
export function transfer(command: 'upload' | 'download', args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return command === 'upload' ? upload(args, env) : download(args);
}
