// `dropstream download <link>`: streams a public link into a file (transfer.ts
// runs it), never over an existing file without --force, printing the path
// it saved.
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { link, lstat, rename, rm, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { decodeExtended, parse as parseDisposition } from 'content-disposition';
import { CliError } from './cli-error.js';
import { parseCommand, text, type Command } from './args.js';
import { createProgress } from './progress.js';
import { errno, httpUrl, Interrupted, networkError, readBody, responseError, responseOf, startRequest } from './transfer-http.js';

export const DOWNLOAD: Command = {
  name: 'download',
  usage: 'download <link> [-o PATH] [--force] [--progress] [--password PW]',
  summary:
    'Saves the file a public link serves, under its own name in the current folder (or -o: a file, or a folder), never over an existing file without --force; ' +
    'prints the path. --password answers a link that asks for one (DROPSTREAM_LINK_PASSWORD too, kept out of the process list).',
  options: { output: { type: 'string', short: 'o' }, force: { type: 'boolean' }, progress: { type: 'boolean' }, password: { type: 'string' } },
  positionals: { min: 1, max: 1 },
};

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    (err) => (errno(err) === 'ENOENT' ? false : Promise.reject(err)),
  );
}

const refuseOverwrite = (path: string) => new CliError(`${path} already exists; pass --force to overwrite it`);

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

interface DownloadOptions {
  url: URL;
  /** -o: a file, or a folder to save the server's file name in; absent: the current folder. */
  output?: string;
  force: boolean;
  progress: boolean;
  /** A password-protected link's password, sent as HTTP Basic (any user name: none). */
  password?: string;
}

export async function download(args: string[]): Promise<void> {
  const options = downloadOptions(args);
  const { url, output, force } = options;
  // Before connecting, when we already know the name.
  const named = await namedDestination(output, force);
  const res = await requestLink(url, options.password);
  const dest = await destinationFor(res, named, output, force);
  await save(res, dest, options);
  process.stdout.write(`${dest}\n`);
}

function downloadOptions(args: string[]): DownloadOptions {
  const { values, positionals } = parseCommand(DOWNLOAD, args);
  const password = text(values, 'password') ?? (process.env.DROPSTREAM_LINK_PASSWORD || undefined);
  return { url: httpUrl(positionals[0]!, 'the link'), output: text(values, 'output'), force: values.force === true, progress: values.progress === true, password };
}

/** The path -o names when it is a file rather than a folder, refused if it exists (without --force). */
async function namedDestination(output: string | undefined, force: boolean): Promise<string | undefined> {
  const intoFolder = output === undefined || (await isDirectory(output));
  if (output !== undefined && !intoFolder && /[/\\]$/.test(output)) throw new CliError(`no such folder: ${output}`);
  const dest = intoFolder ? undefined : resolve(output!);
  if (dest && !force && (await exists(dest))) throw refuseOverwrite(dest);
  return dest;
}

/** Redirects followed at most: a server that offloads downloads sends one (302 to the store's presigned URL). */
const MAX_REDIRECTS = 3;

/** GETs the link: the response when it is 200, else the error it carries. A 302 (S3_PRESIGNED_DOWNLOADS) is followed. */
async function requestLink(url: URL, password: string | undefined, redirects = 0): Promise<IncomingMessage> {
  // Basic with an empty user name, as `curl -u :secret` sends it; a password in the link itself (http://:pw@host/...) works too (node sends it the same way).
  const headers = password === undefined ? undefined : { Authorization: `Basic ${Buffer.from(`:${password}`).toString('base64')}` };
  const req = startRequest(url, { method: 'GET', headers });
  req.end();
  let res: IncomingMessage;
  try {
    res = await responseOf(req);
  } catch (err) {
    throw networkError(err, url);
  }
  const location = res.headers.location;
  if ([301, 302, 303, 307, 308].includes(res.statusCode ?? 0) && location && redirects < MAX_REDIRECTS) {
    res.resume();
    const next = new URL(location, url);
    // The password is for our server: a presigned URL needs none, and another origin must not see it.
    return requestLink(next, next.origin === url.origin ? password : undefined, redirects + 1);
  }
  if (res.statusCode !== 200) throw responseError(res.statusCode ?? 0, await readBody(res).catch(() => ''));
  return res;
}

/** Where the file goes: the path -o named, or the server's file name in the folder; refused if it exists (without --force). */
async function destinationFor(res: IncomingMessage, named: string | undefined, output: string | undefined, force: boolean): Promise<string> {
  let dest = named;
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
  return dest;
}

/** Streams the response into a temp file beside `dest`, checks its length and moves it into place. */
async function save(res: IncomingMessage, dest: string, options: DownloadOptions): Promise<void> {
  const { url, force } = options;
  const lengthHeader = res.headers['content-length'];
  const total = lengthHeader && /^[0-9]+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
  const progress = createProgress({ enabled: options.progress || process.stderr.isTTY === true, total });
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
    if (interrupt.signal.aborted) throw new Interrupted('interrupted');
    if (err instanceof CliError) throw err;
    if ((err as NodeJS.ErrnoException).path !== undefined || (err as NodeJS.ErrnoException).syscall === 'rename') {
      throw new CliError(`cannot write ${dest} (${errno(err) ?? (err as Error).message})`);
    }
    throw networkError(err, url);
  } finally {
    process.off('SIGINT', onInterrupt);
    progress.finish();
  }
}
