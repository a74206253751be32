// autocannon (its Node API) in a process of its own, so the load generator's
// CPU is accounted apart from the server's: on two cores it competes with
// the server, PostgreSQL and Redis. Prints autocannon's result plus this
// process's CPU time.
//   node load.js '{"url","connections","seconds","headers"}'
import autocannon from 'autocannon';
import { selfAccounting } from '../lib/bytes.js';

const spec = JSON.parse(process.argv[2]!) as { url: string; connections: number; seconds: number; headers?: Record<string, string> };
const cpu = process.cpuUsage();
const result = await autocannon({ url: spec.url, connections: spec.connections, duration: spec.seconds, headers: spec.headers });
console.log(JSON.stringify({
  requests: { average: result.requests.average, total: result.requests.total },
  latency: { p50: result.latency.p50, p99: result.latency.p99, average: result.latency.average },
  non2xx: result.non2xx,
  errors: result.errors,
  timeouts: result.timeouts,
  duration: result.duration,
  ...(await selfAccounting(cpu)),
}));
