// The registry of error codes (src/error-codes.ts) is the source; the tables
// of docs/errors.md are what people read, and the OpenAPI document is what
// clients generate code from. Like Fastify's test/internals/errors.test.js
// for its docs, these fail when either says something else than the registry.
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { ERROR_CODES, ERROR_CODE_NAMES, statusOf, type ErrorCode } from '../src/error-codes.js';
import { AppError } from '../src/errors.js';
import { openApiDocument, type Operation, type Response } from '../src/openapi/document.js';

const ERRORS_PAGE = new URL('../docs/errors.md', import.meta.url);
const isCode = (name: string): name is ErrorCode => Object.hasOwn(ERROR_CODES, name);

/** Every `| status | `code`, `code` | when |` row of the page's tables, as [code, status] pairs in page order. */
function tableRows(markdown: string): Array<[string, number]> {
  const rows: Array<[string, number]> = [];
  for (const line of markdown.split('\n')) {
    const cells = /^\|\s*(\d{3})\s*\|([^|]*)\|/.exec(line);
    if (!cells) continue;
    const names = [...cells[2]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!);
    expect(names, `a row without a code: ${line}`).to.not.be.empty;
    for (const name of names) rows.push([name, Number(cells[1])]);
  }
  return rows;
}

describe('error codes', () => {
  describe('registry', () => {
    it('when a code is registered, then it is snake_case with an HTTP error status and a one-sentence meaning', () => {
      expect(ERROR_CODE_NAMES).to.have.length.above(40);
      for (const [code, { status, meaning }] of Object.entries(ERROR_CODES)) {
        expect(code).to.match(/^[a-z]+(_[a-z]+)*$/);
        expect(status, code).to.be.within(400, 599);
        expect(meaning, code).to.match(/^[A-Z].*\.$/);
      }
    });

    it('when an AppError is made, then its status is the registry\'s for its code', () => {
      expect(new AppError('checksum_mismatch', 'x').status).to.equal(460);
      expect(new AppError('database_unavailable', 'x').status).to.equal(503);
      for (const code of ERROR_CODE_NAMES) expect(new AppError(code, 'x').status, code).to.equal(statusOf(code));
    });
  });

  describe('docs/errors.md', () => {
    it('when the page\'s tables are read, then they list every registered code with its status, each once, and nothing else', async () => {
      const rows = tableRows(await readFile(ERRORS_PAGE, 'utf8'));
      const documented = new Map(rows);
      expect(rows.map(([code]) => code).filter((code, i, all) => all.indexOf(code) !== i), 'codes listed twice').to.deep.equal([]);
      expect([...documented.keys()].filter((code) => !isCode(code)), 'documented but not in src/error-codes.ts').to.deep.equal([]);
      expect(ERROR_CODE_NAMES.filter((code) => !documented.has(code)), 'in src/error-codes.ts but not documented').to.deep.equal([]);
      const wrong = ERROR_CODE_NAMES.filter((code) => documented.get(code) !== statusOf(code)).map((code) => `${code}: ${documented.get(code)}, registry ${statusOf(code)}`);
      expect(wrong, 'documented with another status').to.deep.equal([]);
    });

    it('when a table row is checked, then a missing code, an extra one or another status is seen', () => {
      // The parser above, on a page that drifted three ways.
      const rows = new Map(tableRows('| Status | Code | When |\n|---|---|---|\n| 404 | `not_found`, `no_such_code` | x |\n| 400 | `file_not_found` | y |\n'));
      expect([...rows]).to.deep.equal([['not_found', 404], ['no_such_code', 404], ['file_not_found', 400]]);
      expect(isCode('no_such_code')).to.equal(false);
      expect(rows.get('file_not_found')).to.not.equal(statusOf('file_not_found'));
    });
  });

  describe('OpenAPI document', () => {
    const doc = openApiDocument('http://files.test');

    it('when the Error schema lists its codes, then the enum is exactly the registry', () => {
      const error = doc.components.schemas.Error!.properties as { error: { properties: { code: { enum: string[]; description: string } } } };
      const code = error.error.properties.code;
      expect([...code.enum].sort()).to.deep.equal([...ERROR_CODE_NAMES].sort());
      for (const name of ERROR_CODE_NAMES) expect(code.description, name).to.include(`\`${name}\``);
    });

    it('when a response names error codes, then each is registered with that response\'s status', () => {
      const responses: Array<[string, string, Response]> = [];
      for (const [name, response] of Object.entries(doc.components.responses)) responses.push([`components/responses/${name}`, '', response]);
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const method of ['get', 'post', 'delete', 'head', 'options', 'patch'] as const) {
          const op = item[method] as Operation | undefined;
          for (const [status, response] of Object.entries(op?.responses ?? {})) {
            if ('description' in response) responses.push([`${method} ${path}`, status, response]);
          }
        }
      }
      const statusOfComponent: Record<string, string> = { Unauthorized: '401', Forbidden: '403', TooManyRequests: '429', InternalError: '500', MethodNotAllowed: '405' };
      let named = 0;
      for (const [where, status, { description }] of responses) {
        const expected = status || statusOfComponent[where.split('/').pop()!];
        expect(expected, `${where}: which status?`).to.be.a('string');
        for (const match of description.matchAll(/`([a-z_]+)`/g)) {
          const name = match[1]!;
          if (!isCode(name)) continue; // `max_file_size` and the like
          named += 1;
          expect(String(statusOf(name)), `${where} ${status}: ${name}`).to.equal(expected);
        }
      }
      expect(named).to.be.above(30);
    });
  });
});
