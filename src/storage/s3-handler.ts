// The S3 client's HTTP handler with a deadline per request that really fires.
// NodeHttpHandler's own `requestTimeout` only logs a warning unless
// `throwOnRequestTimeout` is set (@smithy/node-http-handler 4.x), and it is
// one figure for every call, whereas a part of 8 MiB needs more time than a
// HEAD. Here each request gets an AbortSignal sized to its work; when it
// fires the request is destroyed and the call fails with StoreTimeoutError,
// which the SDK does not retry (a store that hangs would take three times
// the deadline otherwise).
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { withDeadline, writeDeadline, type StoreCallObserver, type StoreDeadlines } from './store-deadlines.js';

type HttpRequest = Parameters<NodeHttpHandler['handle']>[0];
type HttpResponse = Awaited<ReturnType<NodeHttpHandler['handle']>>['response'];
type NodeHttpHandlerOptions = ConstructorParameters<typeof NodeHttpHandler>[0];
type HttpHandlerOptions = NonNullable<Parameters<NodeHttpHandler['handle']>[1]>;

/** The S3 operation of a request, from its method and query (the handler does not see the command). */
export function operationOf(request: Pick<HttpRequest, 'method' | 'query'>): string {
  const query = request.query ?? {};
  const has = (name: string) => name in query;
  switch (request.method) {
    case 'PUT':
      if (has('partNumber')) return 'upload_part';
      if (has('lifecycle')) return 'put_lifecycle';
      return 'put_object';
    case 'POST':
      if (has('uploads')) return 'create_multipart';
      if (has('uploadId')) return 'complete_multipart';
      return 'post';
    case 'DELETE':
      return has('uploadId') ? 'abort_multipart' : 'delete_object';
    case 'HEAD':
      return 'head_object';
    case 'GET':
      if (has('uploads')) return 'list_uploads';
      if (has('list-type') || has('lifecycle')) return 'list';
      return 'get_object';
    default:
      return request.method.toLowerCase();
  }
}

/**
 * Milliseconds a request may take. A write of n bytes (a part, an object)
 * gets writeDeadline(n). So does completing a multipart upload, for the
 * object it makes (its parts at `partSize` each): a store may copy every
 * byte to complete (s3rver does; AWS documents that completing can take
 * minutes), and 32 completions of 64 MiB at once into s3rver took more than
 * STORE_CALL_TIMEOUT (10 s) on a busy machine. Any other call gets callMs.
 */
export function deadlineOf(request: Pick<HttpRequest, 'method' | 'query' | 'headers' | 'body'>, deadlines: StoreDeadlines, partSize: number): number {
  const operation = operationOf(request);
  if (operation === 'upload_part' || operation === 'put_object') {
    return writeDeadline(deadlines, Number(request.headers['content-length'] ?? request.headers['Content-Length'] ?? 0));
  }
  if (operation === 'complete_multipart') {
    const parts = typeof request.body === 'string' ? request.body.split('<PartNumber>').length - 1 : 0;
    return writeDeadline(deadlines, parts * partSize);
  }
  return deadlines.callMs;
}

export class DeadlineHttpHandler extends NodeHttpHandler {
  constructor(
    options: NodeHttpHandlerOptions,
    private readonly deadlines: StoreDeadlines,
    private readonly observe?: StoreCallObserver,
    /** The store's part size: what a completion's deadline counts per part. */
    private readonly partSize = 0,
  ) {
    super(options);
  }

  /**
   * Resolves when the response's headers have come: for a write that is
   * after its body went out (the deadline covers the upload), for a read it
   * is the first byte (the body's own idle deadline is idleBounded's, s3.ts).
   */
  override handle(request: HttpRequest, options: HttpHandlerOptions = {}): Promise<{ response: HttpResponse }> {
    return withDeadline(
      operationOf(request),
      deadlineOf(request, this.deadlines, this.partSize),
      (signal) => {
        const outer = options.abortSignal as AbortSignal | undefined;
        return super.handle(request, { ...options, abortSignal: outer ? AbortSignal.any([outer, signal]) : signal });
      },
      this.observe,
    );
  }
}
