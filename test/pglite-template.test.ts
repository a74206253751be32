// A new embedded database starts as a copy of dist/pglite-template, made by
// `npm run build` (PGlite's own initdb, in the server, cost 530 MiB of peak
// memory). The compiled build is what these check: `npm run build` first.
import { mkdtemp, readdir, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDatabase } from '../src/db/client.js';
import { seedFromTemplate, templateDir } from '../src/db/pglite-template.js';

describe('the embedded database template', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dropstream-template-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('when the build made it, then every file in it is readable by any user (the image builds as root and runs as `node`)', async () => {
    const entries = await readdir(templateDir, { withFileTypes: true, recursive: true });
    expect(entries.length).to.be.above(100);
    const closed: string[] = [];
    for (const entry of entries) {
      const path = join(entry.parentPath, entry.name);
      const { mode } = await stat(path);
      if ((mode & 0o004) === 0 || (entry.isDirectory() && (mode & 0o001) === 0)) closed.push(path);
    }
    expect(closed).to.deep.equal([]);
  });

  it('when DATA_DIR is new, then the database is a copy of the template, opens, and takes migrations', async () => {
    const pgliteDir = join(dir, 'pglite');
    expect(await seedFromTemplate(pgliteDir)).to.equal(true);
    expect(await seedFromTemplate(pgliteDir), 'a second time').to.equal(false);
    const db = await openDatabase({ pgliteDir });
    try {
      expect((await db.migrate()).length).to.be.above(0);
      expect(await db.prisma.plan.count()).to.be.above(0);
    } finally {
      await db.close();
    }
    expect((await readdir(dir)).sort(), 'nothing left beside it').to.deep.equal(['pglite']);
  });

  it('when the folder holds files but no database (an initdb that died), then the template is not copied over them', async () => {
    const pgliteDir = join(dir, 'pglite');
    await mkdir(pgliteDir);
    await writeFile(join(pgliteDir, 'stray'), 'x');
    expect(await seedFromTemplate(pgliteDir)).to.equal(false);
    expect(await readdir(pgliteDir)).to.deep.equal(['stray']);
    expect(await readdir(dir)).to.deep.equal(['pglite']);
  });
});
