// What a load test saw: every request's kind, status, latency and bytes,
// folded into one-second buckets for the report's charts, plus the server's
// own numbers scraped from /metrics.
import { isThrottled } from './throttle.js';

/** One answered (or failed) request. status 0: no answer (network error, cut). */
export interface Sample {
  kind: string;
  status: number;
  ms: number;
  bytesOut: number;
  bytesIn: number;
  /** Given up on by the loadtest itself (the run ended): not an error. */
  aborted?: boolean;
  /** Cut by the loadtest's own proxy (--cut-every): expected, not an error. */
  cut?: boolean;
  /** An answer the run asked for to learn something (404 to the direct-upload offer: the server makes none): counted, never an error. */
  expected?: boolean;
  /**
   * A whole operation made of requests already recorded (a finished tus
   * upload): its own row, but no request of the run's totals, or the total
   * would count one the server never saw.
   */
  operation?: boolean;
}

export interface Second {
  t: number;
  bytesOut: number;
  bytesIn: number;
  /** Latencies of the requests that ended in this second, by kind. */
  latency: Record<string, number[]>;
  statuses: Record<string, number>;
  requests: number;
  errors: number;
  throttled: number;
}

export interface ServerPoint {
  t: number;
  rssBytes?: number;
  uploadsInFlight?: number;
  resumableInFlight?: number;
  partBuffers?: number;
  storeErrors?: number;
}

export interface KindTotals {
  /** Attempts answered or failed (a retry is one more); for a whole operation (Sample.operation), the operations finished. */
  requests: number;
  errors: number;
  /** Answered 429 or 503: refused by a limit or the upload cap (throttle.ts), neither success nor error. */
  throttled: number;
  bytesOut: number;
  bytesIn: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Answers by status ("none": no answer; "abandoned", "cut": see Sample). */
  statuses: Record<string, number>;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** An error: no answer, or a 4xx or 5xx other than the throttling answers (429, 503), which are an outcome of their own. */
export const isError = (s: Sample) => !s.aborted && !s.expected && (s.status === 0 || (s.status >= 400 && !isThrottled(s.status)));

export class Recorder {
  readonly started = Date.now();
  readonly seconds: Second[] = [];
  readonly server: ServerPoint[] = [];
  private readonly byKind = new Map<string, { latencies: number[]; requests: number; errors: number; throttled: number; bytesOut: number; bytesIn: number; statuses: Record<string, number>; operation: boolean }>();
  /** Bytes still moving, counted as they go so throughput is not lumped at each request's end. */
  private liveOut = 0;
  private liveIn = 0;
  requests = 0;
  errors = 0;
  throttled = 0;
  aborted = 0;

  private second(now = Date.now()): Second {
    const t = Math.floor((now - this.started) / 1000);
    while (this.seconds.length <= t) this.seconds.push({ t: this.seconds.length, bytesOut: 0, bytesIn: 0, latency: {}, statuses: {}, requests: 0, errors: 0, throttled: 0 });
    return this.seconds[t]!;
  }

  /** Bytes sent or received right now (called by the body streams). */
  sent(n: number): void {
    this.second().bytesOut += n;
    this.liveOut += n;
  }

  received(n: number): void {
    this.second().bytesIn += n;
    this.liveIn += n;
  }

  record(sample: Sample): void {
    const second = this.second();
    const kind = this.byKind.get(sample.kind) ?? { latencies: [], requests: 0, errors: 0, throttled: 0, bytesOut: 0, bytesIn: 0, statuses: {}, operation: sample.operation === true };
    this.byKind.set(sample.kind, kind);
    // Given up by the loadtest, or cut by its own proxy: the server may still
    // have answered (and counted) it; neither is an error of the server.
    if (sample.aborted || sample.cut) {
      if (sample.aborted) this.aborted += 1;
      const label = sample.aborted ? 'abandoned' : 'cut';
      kind.statuses[label] = (kind.statuses[label] ?? 0) + 1;
      return;
    }
    kind.requests += 1;
    if (sample.operation) {
      kind.latencies.push(sample.ms);
      kind.bytesOut += sample.bytesOut;
      kind.bytesIn += sample.bytesIn;
      kind.statuses[String(sample.status)] = (kind.statuses[String(sample.status)] ?? 0) + 1;
      (second.latency[sample.kind] ??= []).push(sample.ms);
      return;
    }
    this.requests += 1;
    second.requests += 1;
    // A refusal takes a millisecond or two: counted, but kept out of the
    // latencies, or a throttled run would show its best percentiles.
    const throttled = isThrottled(sample.status);
    if (!throttled) kind.latencies.push(sample.ms);
    kind.bytesOut += sample.bytesOut;
    kind.bytesIn += sample.bytesIn;
    if (isError(sample)) {
      kind.errors += 1;
      this.errors += 1;
      second.errors += 1;
    } else if (throttled) {
      kind.throttled += 1;
      this.throttled += 1;
      second.throttled += 1;
    }
    if (!throttled) (second.latency[sample.kind] ??= []).push(sample.ms);
    const status = String(sample.status || 'none');
    second.statuses[status] = (second.statuses[status] ?? 0) + 1;
    kind.statuses[status] = (kind.statuses[status] ?? 0) + 1;
  }

  scraped(point: Omit<ServerPoint, 't'>): void {
    this.server.push({ t: (Date.now() - this.started) / 1000, ...point });
  }

  totals(): Record<string, KindTotals> {
    const out: Record<string, KindTotals> = {};
    for (const [name, kind] of [...this.byKind].sort()) {
      const sorted = [...kind.latencies].sort((a, b) => a - b);
      out[name] = {
        requests: kind.requests,
        errors: kind.errors,
        throttled: kind.throttled,
        bytesOut: kind.bytesOut,
        bytesIn: kind.bytesIn,
        p50: percentile(sorted, 50),
        p90: percentile(sorted, 90),
        p99: percentile(sorted, 99),
        max: sorted.at(-1) ?? 0,
        statuses: { ...kind.statuses },
      };
    }
    return out;
  }

  /** Percentiles over every request the loadtest counted (throttled ones and whole operations aside). */
  overall(): { p50: number; p90: number; p99: number; max: number } {
    const all = [...this.byKind.values()].filter((k) => !k.operation).flatMap((k) => k.latencies).sort((a, b) => a - b);
    return { p50: percentile(all, 50), p90: percentile(all, 90), p99: percentile(all, 99), max: all.at(-1) ?? 0 };
  }

  maxRssBytes(): number | undefined {
    const values = this.server.map((p) => p.rssBytes).filter((v): v is number => v !== undefined);
    return values.length ? Math.max(...values) : undefined;
  }

  /** For the progress line: bytes moved so far. */
  moved(): { out: number; in: number } {
    return { out: this.liveOut, in: this.liveIn };
  }
}
