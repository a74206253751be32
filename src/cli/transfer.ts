// `dropstream upload` and `dropstream download` (download.ts): the public API from the
// command line. Both stream (the file is never held in memory), print one
// line on stdout on success (the link, the saved path) so scripts can capture
// it, and one line on stderr on failure. The API key is never printed.
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { CliError } from './cli-error.js';
import { apiClient } from './api-client.js';
import { parseCommand, text, UsageError, usageOf, type Command } from './args.js';
import { LINK_RULE_OPTIONS, LINK_RULE_USAGE, linkRules } from './commands/files.js';
import { DOWNLOAD, download } from './download.js';
import { createProgress } from './progress.js';
import { RESUMABLE_THRESHOLD, resumableUpload } from './resumable-upload.js';
import { requestUploadUrl, uploadToRequest } from './request-upload.js';
import { parseSize } from './units.js';
import { directApi, type DirectOffer } from './direct/api.js';
import { directUpload } from './direct/upload.js';
import { apiUrl, errno, Interrupted, networkError, onSigint, readBody, responseError, responseOf, startRequest } from './transfer-http.js';

export const UPLOAD: Command = {
  name: 'upload',
  usage: `upload <path> [--server URL] [--key KEY] [--progress] [--resumable | --plain] [--fresh] [--part-size SIZE]
                  ${LINK_RULE_USAGE}
       upload <path> --request UPLOAD_LINK [--password PW]`,
  summary:
    'Uploads a file and prints its public link. When the server offers uploads straight to its store (S3_DIRECT_UPLOADS), ' +
    'the file goes there in parts, 4 at once (--part-size: their size, 5MiB to 5GiB; the server picks otherwise); ' +
    'else from 64 MiB on it goes resumable (tus). --resumable forces tus, --plain one request. Either way an upload cut off or ' +
    'interrupted with Ctrl-C continues where it stopped when the same command runs again (--fresh starts over). ' +
    '--expires-in (seconds, or 90m, 12h, 7d), --max-downloads and --password set the rules of its public link. ' +
    'With --request, it goes through a file request\'s upload link (no key; --password is the request\'s) and prints the receipt.',
  options: {
    server: { type: 'string' },
    key: { type: 'string' },
    progress: { type: 'boolean' },
    resumable: { type: 'boolean' },
    plain: { type: 'boolean' },
    fresh: { type: 'boolean' },
    'part-size': { type: 'string' },
    // Through someone's file request (its upload_link) instead of into your account: no key.
    request: { type: 'string' },
    ...LINK_RULE_OPTIONS,
  },
  positionals: { min: 1, max: 1 },
};

export const TRANSFER_COMMANDS = [UPLOAD, DOWNLOAD];

/** The multipart/form-data framing around the file's bytes: one part named `file`. */
export function multipartFraming(filename: string, fields: Record<string, string> = {}): { contentType: string; head: Buffer; tail: Buffer } {
  // CR or LF would break the framing; the server refuses control characters anyway.
  if (/[\u0000-\u001f\u007f]/.test(filename)) throw new CliError(`cannot upload ${JSON.stringify(filename)}: the name has control characters`);
  const boundary = `dropstream-${randomBytes(16).toString('hex')}`;
  // Raw UTF-8 in a quoted string, as browsers and curl send it (the server decodes part names as UTF-8).
  const quoted = filename.replace(/[\\"]/g, '\\$&');
  // The options go before the file part: the server reads them before it stores a byte.
  const parts = Object.entries(fields).map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
  const head = `${parts.join('')}--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
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

/**
 * The server's offer of uploads straight to its store (one GET), or
 * undefined when it makes none: then tus or one multipart request, as before.
 */
async function directOffer(base: URL, authorization: string | undefined): Promise<DirectOffer | undefined> {
  const api = directApi({ base, authorization, signal: new AbortController().signal, onRetry: () => {} });
  return api.offer().catch((err: unknown) => {
    if (err instanceof CliError) throw err;
    throw networkError((err as { cause?: unknown }).cause ?? err, base);
  });
}

/** Whether this upload asks the server's offer: not with --plain or --resumable (they name the way), nor for an empty file (direct needs a byte). */
function mayGoDirect(values: { plain?: boolean | string; resumable?: boolean | string; 'part-size'?: boolean | string }, size: number): boolean {
  if (values['part-size'] !== undefined && (values.plain || values.resumable)) throw new UsageError(`--part-size is for uploads straight to the store, not with --plain or --resumable\n${usageOf(UPLOAD)}`);
  return !values.plain && !values.resumable && size > 0;
}

/** --part-size, in bytes, or undefined. */
const partSizeOf = (values: Record<string, string | boolean | undefined>) => {
  const value = text(values, 'part-size');
  return value === undefined ? undefined : parseSize('part-size', value);
};

/** A --part-size that would go unused is said, not ignored. */
function noDirect(values: Record<string, string | boolean | undefined>): void {
  if (values['part-size'] !== undefined) throw new CliError('--part-size is for uploads straight to the store, and this server does not offer them (S3_DIRECT_UPLOADS)');
}

async function upload(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const { values, positionals } = parseCommand(UPLOAD, args);
  const path = positionals[0]!;
  const requestLink = text(values, 'request');
  if (requestLink !== undefined) {
    // --password is the request's own then; the other rules are the owner's to set, not the sender's.
    const size = await regularFileSize(path);
    const password = text(values, 'password');
    const showProgress = values.progress === true || process.stderr.isTTY === true;
    const authorization = password === undefined ? undefined : `Basic ${Buffer.from(`:${password}`).toString('base64')}`;
    const base = new URL(`${requestUploadUrl(requestLink)}/uploads/direct`);
    const offer = mayGoDirect(values, size) ? await directOffer(base, authorization) : undefined;
    if (offer) {
      const receipt = await directUpload({ base, authorization, offer, path, size, showProgress, rules: {}, partSize: partSizeOf(values), fresh: values.fresh === true, env });
      process.stdout.write(`${JSON.stringify(receipt)}\n`);
      return;
    }
    noDirect(values);
    if (values.resumable || (!values.plain && size >= RESUMABLE_THRESHOLD)) {
      const endpoint = new URL(`${requestUploadUrl(requestLink)}/uploads`);
      process.stdout.write(`${await resumableUpload({ endpoint, key: '', path, size, showProgress, metadata: {}, fresh: values.fresh === true, env, request: { authorization } })}\n`);
      return;
    }
    const receipt = await uploadToRequest(path, size, requestLink, password, (name) => multipartFraming(name));
    process.stdout.write(`${JSON.stringify(receipt)}\n`);
    return;
  }
  if (values.resumable && values.plain) throw new UsageError(`--resumable and --plain exclude each other\n${usageOf(UPLOAD)}`);
  const rules = linkRules(values);
  // As the API takes them: text fields (multipart) or Upload-Metadata (tus).
  const fields = Object.fromEntries(Object.entries(rules).map(([name, value]) => [name, String(value)]));
  const { server, key } = apiClient({ server: text(values, 'server'), key: text(values, 'key') }, env);
  const size = await regularFileSize(path);
  const showProgress = values.progress === true || process.stderr.isTTY === true;
  const base = apiUrl(server, '/api/v1/uploads/direct');
  const offer = mayGoDirect(values, size) ? await directOffer(base, `Bearer ${key}`) : undefined;
  if (offer) {
    const completed = await directUpload({ base, authorization: `Bearer ${key}`, offer, path, size, showProgress, rules, partSize: partSizeOf(values), fresh: values.fresh === true, env });
    if (typeof completed.public_link !== 'string') throw new CliError(`the server completed the upload without a public link: ${JSON.stringify(completed).slice(0, 200)}`);
    process.stdout.write(`${completed.public_link}\n`);
    return;
  }
  noDirect(values);
  // Large files go resumable (tus): a cut connection costs a retry, not the upload.
  if (values.resumable || (!values.plain && size >= RESUMABLE_THRESHOLD)) {
    const link = await resumableUpload({ endpoint: apiUrl(server, '/api/v1/uploads'), key, path, size, showProgress, metadata: fields, fresh: values.fresh === true, env });
    process.stdout.write(`${link}\n`);
    return;
  }
  const { contentType, head, tail } = multipartFraming(basename(path), fields);
  const url = apiUrl(server, '/api/v1/files/upload');

  const progress = createProgress({ enabled: showProgress, total: size });
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
  // Ctrl-C: abort the request (the server drops the partial file; a plain upload cannot resume), exit 130.
  let interrupted = false;
  const restoreSigint = onSigint(() => {
    interrupted = true;
    stop.abort();
    req.destroy();
  });
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
  restoreSigint();
  progress.finish();
  if (interrupted) throw new Interrupted('interrupted; a plain upload starts over when run again (files from 64 MiB, or with --resumable, resume)');

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

/** Runs `upload` or `download` with the arguments after the command name. */
export function transfer(command: 'upload' | 'download', args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return command === 'upload' ? upload(args, env) : download(args);
}
