// The HTML report: one self-contained file (uPlot and its stylesheet inlined,
// the data as JSON), so it opens anywhere with no network. A Content-Security-
// Policy forbids any fetch, so a chart that tried one would fail visibly.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Recorder } from './recorder.js';

const require = createRequire(import.meta.url);
const asset = (path: string) => readFileSync(require.resolve(path), 'utf8');

/** `</script>` inside the inlined data or library would end the script element early. */
const safe = (text: string) => text.replace(/<\/(script)/gi, '<\\/$1');
const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

export function chartData(recorder: Recorder) {
  const kinds = [...new Set(recorder.seconds.flatMap((s) => Object.keys(s.latency)))].sort();
  const statuses = [...new Set(recorder.seconds.flatMap((s) => Object.keys(s.statuses)))].sort();
  const pct = (values: number[] | undefined, p: number) => {
    if (!values?.length) return null;
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  };
  return {
    t: recorder.seconds.map((s) => s.t),
    outMiBs: recorder.seconds.map((s) => s.bytesOut / 2 ** 20),
    inMiBs: recorder.seconds.map((s) => s.bytesIn / 2 ** 20),
    latency: kinds.map((kind) => ({
      kind,
      p50: recorder.seconds.map((s) => pct(s.latency[kind], 50)),
      p99: recorder.seconds.map((s) => pct(s.latency[kind], 99)),
    })),
    statuses: statuses.map((status) => ({ status, counts: recorder.seconds.map((s) => s.statuses[status] ?? 0) })),
    outcomes: {
      answered: recorder.seconds.map((s) => s.requests - s.errors - s.throttled),
      throttled: recorder.seconds.map((s) => s.throttled),
      errors: recorder.seconds.map((s) => s.errors),
    },
    server: {
      t: recorder.server.map((p) => p.t),
      rssMiB: recorder.server.map((p) => (p.rssBytes === undefined ? null : p.rssBytes / 2 ** 20)),
      uploadsInFlight: recorder.server.map((p) => p.uploadsInFlight ?? null),
      resumableInFlight: recorder.server.map((p) => p.resumableInFlight ?? null),
      partBuffers: recorder.server.map((p) => p.partBuffers ?? null),
      storeErrors: recorder.server.map((p) => p.storeErrors ?? null),
    },
  };
}

/**
 * Draws the charts from DATA; runs in the page. The legends show the series'
 * names only (live: false): a static page has no cursor, and uPlot's hover
 * legend read "Value: --" beside every series (issue 39). Latency is one
 * small chart per request kind (p50 and p99), not two dozen lines on one axis.
 */
const PAGE_SCRIPT = `
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];
const full = () => Math.min(900, document.body.clientWidth - 20);
function chart(el, title, yLabel, x, series, width, height) {
  if (!x.length || !series.length) { el.textContent = title + ': no data'; return; }
  new uPlot({
    title, width: width || full(), height: height || 220,
    legend: { live: false },
    cursor: { show: false },
    scales: { x: { time: false } },
    axes: [{ label: 'seconds' }, { label: yLabel }],
    series: [{}].concat(series.map((s, i) => ({ label: s.label, stroke: s.color || COLORS[i % COLORS.length], width: 2, spanGaps: true }))),
  }, [x].concat(series.map((s) => s.values)), el);
}
const byId = (id) => document.getElementById(id);
const d = DATA.charts;
chart(byId('throughput'), 'Throughput', 'MiB/s', d.t, [{ label: 'out (sent)', values: d.outMiBs }, { label: 'in (received)', values: d.inMiBs }]);
chart(byId('outcomes'), 'Requests per second: answered, throttled (429/503), errors', 'per second', d.t, [
  { label: 'answered', values: d.outcomes.answered, color: '#16a34a' },
  { label: 'throttled', values: d.outcomes.throttled, color: '#d97706' },
  { label: 'errors', values: d.outcomes.errors, color: '#dc2626' },
]);
const latency = byId('latency');
if (!d.latency.length) latency.textContent = 'Latency: no data';
for (const k of d.latency) {
  const el = document.createElement('div');
  el.className = 'latency-chart';
  el.dataset.kind = k.kind;
  latency.appendChild(el);
  chart(el, 'Latency: ' + k.kind, 'ms', d.t, [{ label: 'p50', values: k.p50, color: '#2563eb' }, { label: 'p99', values: k.p99, color: '#dc2626' }], Math.max(280, Math.floor(full() / 2) - 10), 160);
}
chart(byId('statuses'), 'Responses by status', 'per second', d.t, d.statuses.map((s) => ({ label: s.status, values: s.counts })));
const s = d.server;
const present = (values) => values.some((v) => v !== null);
chart(byId('rss'), 'Server RSS (/metrics)', 'MiB', s.t, [{ label: 'RSS', values: s.rssMiB }].filter((x) => present(x.values)));
chart(byId('inflight'), 'Uploads in flight (/metrics)', 'uploads', s.t,
  [{ label: 'uploads', values: s.uploadsInFlight }, { label: 'resumable', values: s.resumableInFlight }, { label: 'part buffers', values: s.partBuffers }].filter((x) => present(x.values)));
chart(byId('storeErrors'), 'Store errors (/metrics, cumulative)', 'errors', s.t, [{ label: 'store errors', values: s.storeErrors }].filter((x) => present(x.values)));
document.body.dataset.rendered = 'true';
`;

export function renderReport(summary: Record<string, any>, recorder: Recorder): string {
  const data = { summary, charts: chartData(recorder) };
  const rows = Object.entries(summary.kinds as Record<string, any>)
    .map(([kind, k]) => `<tr><td>${escapeHtml(kind)}</td><td>${k.requests}</td><td>${k.errors}</td><td>${k.throttled}</td><td>${(k.bytesOut / 2 ** 20).toFixed(1)}</td><td>${(k.bytesIn / 2 ** 20).toFixed(1)}</td><td>${k.p50.toFixed(1)}</td><td>${k.p90.toFixed(1)}</td><td>${k.p99.toFixed(1)}</td><td>${k.max.toFixed(1)}</td></tr>`)
    .join('\n');
  const params = escapeHtml(JSON.stringify(summary.parameters, null, 2));
  // Red or green by the thresholds and by throttling (summary.ts decides; the page only shows it).
  const verdict = `<div id="verdict" class="${summary.verdict.ok ? 'ok' : 'bad'}">${summary.verdict.ok ? 'PASS' : 'FAIL'}: ${escapeHtml(summary.verdict.headline)}</div>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>dropstream loadtest: ${escapeHtml(summary.parameters.scenario)}</title>
<style>${asset('uplot/dist/uPlot.min.css')}
body { font: 14px system-ui, sans-serif; margin: 10px; color: #111; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
td:first-child { text-align: left; }
#verdict { padding: 8px 12px; font-weight: bold; font-size: 16px; color: #fff; border-radius: 4px; }
#verdict.bad { background: #b91c1c; } #verdict.ok { background: #15803d; }
.chart { margin: 12px 0; min-height: 40px; } #latency { display: flex; flex-wrap: wrap; gap: 10px; }</style></head>
<body>
${verdict}
<h1>dropstream loadtest: ${escapeHtml(summary.parameters.scenario)}</h1>
<p>${escapeHtml(summary.parameters.server)}, ${escapeHtml(summary.startedAt)}, ${summary.elapsedSeconds.toFixed(1)} s measured,
${summary.requests} requests, ${summary.errors} errors (${(summary.errorRate * 100).toFixed(2)} %), ${summary.throttled} throttled (${(summary.throttledRate * 100).toFixed(1)} %), p99 ${summary.p99Ms.toFixed(1)} ms${
    summary.server.maxRssMiB === null ? '' : `, server RSS max ${summary.server.maxRssMiB.toFixed(1)} MiB`
  }. Cleanup (not measured): ${summary.cleanup.deleted} files deleted${summary.cleanup.failed ? `, ${summary.cleanup.failed} left` : ''}.</p>
<div id="throughput" class="chart"></div><div id="outcomes" class="chart"></div><div id="latency" class="chart"></div><div id="statuses" class="chart"></div>
<div id="rss" class="chart"></div><div id="inflight" class="chart"></div><div id="storeErrors" class="chart"></div>
<h2>Totals</h2>
<table><tr><th>kind</th><th>requests</th><th>errors</th><th>throttled</th><th>MiB out</th><th>MiB in</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th></tr>
${rows}</table>
<h2>Parameters (to repeat the run)</h2><pre>${params}</pre>
<script>${safe(asset('uplot/dist/uPlot.iife.min.js'))}</script>
<script>const DATA = ${safe(JSON.stringify(data))};${PAGE_SCRIPT}</script>
</body></html>
`;
}
