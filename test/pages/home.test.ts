// GET / on the public listener: a person who opens the server's address
// finds where to go next (issue 37, item 8), in a browser or with curl.
// Through the app's callback: no port is opened (test/helpers/built-server.ts).
import { expect } from 'chai';
import { buildTestServer, type BuiltTestServer } from '../helpers/built-server.js';
import { PUBLIC_URL } from '../helpers/server.js';

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

describe('GET /', () => {
  let t: BuiltTestServer;
  before(async () => {
    t = await buildTestServer('pglite');
  });
  after(() => t?.close());

  it('when a browser opens / (Accept: text/html), then a page with no scripts links the web app, the docs and the document, and names the API and the README', async () => {
    const res = await t.call('/', { headers: { Accept: BROWSER_ACCEPT } });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    expect(res.headers.get('content-security-policy')).to.equal("default-src 'none'");
    expect(res.headers.get('vary')).to.match(/\bAccept\b/);
    const links = [...res.text.matchAll(/\bhref\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]!);
    expect(links).to.deep.equal(['/app', '/docs', '/api/v1/openapi.json']);
    // Every link answers: nothing points at a page this server does not have.
    for (const link of links) expect((await t.fetch(link)).status, link).to.equal(200);
    expect(res.text).to.not.match(/<script|<img|<link/i);
    expect(res.text).to.include(`${PUBLIC_URL}/api/v1`).and.include('README.md');
  });

  it('when / is asked for without HTML (curl sends */*), then JSON points at the web app, the docs, the document, the API and the README', async () => {
    for (const accept of [undefined, '*/*', 'application/json']) {
      const res = await t.call('/', { headers: accept ? { Accept: accept } : {} });
      expect(res.status, String(accept)).to.equal(200);
      expect(res.headers.get('content-type'), String(accept)).to.match(/^application\/json/);
      expect(res.body, String(accept)).to.deep.equal({
        success: true,
        service: 'dropstream',
        app: `${PUBLIC_URL}/app`,
        docs: `${PUBLIC_URL}/docs`,
        openapi: `${PUBLIC_URL}/api/v1/openapi.json`,
        api: `${PUBLIC_URL}/api/v1`,
        readme: 'README.md in the dropstream repository (and its npm package): running it, curl examples, configuration',
      });
    }
  });

  it('when / is asked with another method, then 405 with Allow, as on every route', async () => {
    const res = await t.call('/', { method: 'POST' });
    expect(res.status).to.equal(405);
    expect(res.headers.get('allow')).to.include('GET');
  });
});
