// docs/grafana-dashboard.json: every PromQL query names only metrics a
// started server really exports on /metrics (a renamed metric would leave a
// panel silently empty).
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Histogram series (_bucket, _sum, _count) belong to the histogram's family name. */
const family = (name: string) => name.replace(/_(bucket|sum|count)$/, '');
const FUNCTIONS = new Set(['rate', 'increase', 'sum', 'by', 'le', 'histogram_quantile', 'route', 'status', 'reason', 'avg', 'max', 'min']);

describe('Grafana dashboard (docs/grafana-dashboard.json)', function () {
  this.timeout(30_000);
  let t: TestServer;
  before(async () => {
    t = await startTestServer('pglite');
  });
  after(() => t?.close());

  it('when its queries are read, then every metric they name is one the server exports', async () => {
    const exported = new Set<string>();
    const res = await fetch(`${t.server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${t.server.adminToken}` } });
    for (const line of (await res.text()).split('\n')) {
      const m = /^# TYPE (\S+) /.exec(line);
      if (m) exported.add(m[1]!);
    }
    expect(exported.size).to.be.above(10);
    const dashboard = JSON.parse(await readFile('docs/grafana-dashboard.json', 'utf8'));
    const queries: string[] = dashboard.panels.flatMap((p: any) => p.targets.map((target: any) => target.expr));
    expect(queries.length).to.be.at.least(8);
    for (const query of queries) {
      const names = (query.replace(/\[[^\]]*\]/g, '').match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? []).filter((w) => !FUNCTIONS.has(w) && !/^[0-9]/.test(w));
      expect(names.length, query).to.be.at.least(1);
      for (const name of names) expect(exported.has(family(name)), `${name} in ${query}`).to.equal(true);
    }
  });
});
