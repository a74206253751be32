import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { buildInfo } from './version.js';

/**
 * What /metrics (admin listener) shows, in one registry per server instead
 * of prom-client's global one, so tests and several servers in one process
 * never mix their numbers.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: 'dropstream_http_requests_total',
    help: 'HTTP requests, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });

  readonly requestDuration = new Histogram({
    name: 'dropstream_http_request_duration_seconds',
    help: 'Time from request to the end of the response, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });

  readonly uploadedBytes = new Counter({
    name: 'dropstream_uploaded_bytes_total',
    help: 'Bytes of files stored by completed uploads',
    registers: [this.registry],
  });

  readonly downloadedBytes = new Counter({
    name: 'dropstream_downloaded_bytes_total',
    help: 'Bytes of file content sent by completed downloads',
    registers: [this.registry],
  });

  readonly rateLimitRefusals = new Counter({
    name: 'dropstream_rate_limit_refusals_total',
    help: 'Requests refused with 429, by reason (minute, day, auth_failures, link_failures, admin_failures, password_failures, password_checks_busy, in_flight)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly uploadRefusals = new Counter({
    name: 'dropstream_upload_refusals_total',
    help: 'Uploads (plain, tus PATCH or POST with a body) refused or cut, by reason (server_busy, too_many_uploads, upload_too_slow)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly webhookDeliveries = new Counter({
    name: 'dropstream_webhook_deliveries_total',
    help: 'Tries of webhook deliveries by this instance, by outcome (delivered, failed: tried again later, given_up: past WEBHOOK_RETRY_HOURS)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly webhookEventsDropped = new Counter({
    name: 'dropstream_webhook_events_dropped_total',
    help: 'Webhook messages not written because their webhook held WEBHOOK_PENDING_DOWNLOADS undelivered ones, by type (file.downloaded only)',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });

  readonly storeErrors = new Counter({
    name: 'dropstream_store_errors_total',
    help: 'Object store failures seen by requests or clean-up',
    registers: [this.registry],
  });

  readonly storeTimeouts = new Counter({
    name: 'dropstream_store_timeouts_total',
    help: 'Object store calls that did not answer within their deadline, by operation (upload_part, put_object, get_object, head_object, delete_object, ...)',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly resumableCreated = new Counter({
    name: 'dropstream_resumable_uploads_created_total',
    help: 'Resumable (tus) uploads created',
    registers: [this.registry],
  });

  readonly logDroppedBytes = new Counter({
    name: 'dropstream_log_dropped_bytes_total',
    help: 'Log bytes dropped because stdout did not keep up and the log buffer was full (LOG_BUFFER_BYTES)',
    registers: [this.registry],
  });

  readonly resumableInFlight = new Gauge({
    name: 'dropstream_resumable_uploads_in_flight',
    help: 'Resumable (tus) uploads receiving bytes on this instance now (PATCH, or POST with a body)',
    registers: [this.registry],
  });

  readonly resumableReceivedBytes = new Counter({
    name: 'dropstream_resumable_received_bytes_total',
    help: 'Bytes stored by resumable uploads, counted as each request ends',
    registers: [this.registry],
  });

  readonly resumedBytes = new Counter({
    name: 'dropstream_resumed_bytes_total',
    help: 'Bytes clients did not send again: the offset at which each upload continued after a request cut short',
    registers: [this.registry],
  });

  readonly resumableDigestReads = new Counter({
    name: 'dropstream_resumable_digest_reads_total',
    help: 'Resumable uploads whose SHA-256 was read back from the completed object: a PATCH reached an instance that did not hold its running hash (another replica, a restart)',
    registers: [this.registry],
  });

  readonly resumableInterruptions = new Counter({
    name: 'dropstream_resumable_interruptions_total',
    help: 'Resumable upload requests cut short; what they delivered was kept',
    registers: [this.registry],
  });

  readonly connectionsRefused = new Counter({
    name: 'dropstream_connections_refused_total',
    help: 'Connections to the public listener closed as they came because their address already had MAX_CONNECTIONS_PER_ADDRESS open',
    registers: [this.registry],
  });

  readonly connectionsShed = new Counter({
    name: 'dropstream_connections_shed_total',
    help: 'Connections to the public listener closed to stay within MAX_CONNECTIONS, by reason (idle_closed: the oldest idle one made room for a new one; body_waiting_closed: the oldest was waiting on its client for a JSON body; new_refused: none was idle, the new one was closed)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly connectionsOpen = new Gauge({
    name: 'dropstream_connections_open',
    help: 'Connections open on the public listener, which MAX_CONNECTIONS caps',
    registers: [this.registry],
  });

  constructor(uploadsInFlight: () => number) {
    // Prometheus' build-info idiom: always 1, the facts in its labels, so a
    // query can tell which instances run which version during a rolling upgrade.
    const { version, commit } = buildInfo();
    new Gauge({
      name: 'dropstream_build_info',
      help: 'Always 1; the version (package.json) and commit (the build\'s, or unknown) this instance runs',
      labelNames: ['version', 'commit'] as const,
      registers: [this.registry],
    }).set({ version, commit }, 1);
    new Gauge({
      name: 'dropstream_uploads_in_flight',
      help: 'Uploads currently streaming on this instance (plain and resumable), the places UPLOAD_CONCURRENCY caps',
      registers: [this.registry],
      collect() {
        this.set(uploadsInFlight());
      },
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'dropstream_' });
  }
}
