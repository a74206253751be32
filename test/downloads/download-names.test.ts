// File names as common clients save them: curl -OJ reads only the ASCII
// `filename` (a readable spelling), wget --content-disposition and our CLI
// read `filename*` (the exact UTF-8 name).
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { asciiFilename } from '../../src/downloads/attachment.js';
import { uploadFile } from '../helpers/client.js';
import { backends } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';
import { sharedServer } from '../helpers/shared.js';

const run = promisify(execFile);
const bin = fileURLToPath(new URL('../../bin/dropstream.js', import.meta.url));

/** Name uploaded -> what a client reading only the ASCII `filename` saves. */
const NAMES: [string, string][] = [
  ['résumé 2026 – final.pdf', 'resume 2026 - final.pdf'],
  ['“Quoted” ‘names’ — Straße.txt', `'Quoted' 'names' - Strasse.txt`],
  ['naïve "report".pdf', `naive 'report'.pdf`],
  ['Ångström ﬁle…v2.txt', 'Angstrom file...v2.txt'],
  ['北京 report 🎉.pdf', '__ report _.pdf'],
  ['plain-ascii.txt', 'plain-ascii.txt'],
];

describe('download names: the ASCII spelling', () => {
  for (const [name, ascii] of NAMES) {
    it(`when the name is ${JSON.stringify(name)}, then the ASCII filename is ${JSON.stringify(ascii)}`, () => {
      expect(asciiFilename(name)).to.equal(ascii);
    });
  }
});

for (const backend of backends) {
  describe(`download names with curl, wget and the CLI (${backend})`, () => {
    let t: TestServer;
    let key: string;
    const dirs: string[] = [];
    const folder = async () => {
      const dir = await mkdtemp(join(tmpdir(), 'dropstream-names-'));
      dirs.push(dir);
      return dir;
    };

    before(async () => {
      t = await sharedServer(backend);
      ({ apiKey: key } = await t.account());
    });
    after(async () => {
      await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
    });

    for (const [name, ascii] of NAMES) {
      it(`when ${JSON.stringify(name)} is downloaded, then curl -OJ saves ${JSON.stringify(ascii)}, and wget and dropstream download save the exact name`, async () => {
        const content = `content of ${name}`;
        const up = await uploadFile(t.server.url, key, name, content);
        expect(up.status).to.equal(201);
        const url = t.url(up.body.public_link);

        const byCurl = await folder();
        await run('curl', ['-sS', '--fail', '-OJ', url], { cwd: byCurl });
        expect(await readdir(byCurl)).to.deep.equal([ascii]);
        expect(await readFile(join(byCurl, ascii), 'utf8')).to.equal(content);

        const byWget = await folder();
        await run('wget', ['-q', '--content-disposition', url], { cwd: byWget });
        expect(await readdir(byWget)).to.deep.equal([name]);

        const byCli = await folder();
        const { stdout } = await run(process.execPath, [bin, 'download', url], { cwd: byCli });
        expect(stdout.trim()).to.equal(join(byCli, name));
        expect(await readFile(join(byCli, name), 'utf8')).to.equal(content);
      });
    }
  });
}
