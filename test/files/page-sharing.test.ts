import { expect } from 'chai';
import { FileService } from '../../src/files/service.js';

// FileService.pageJson: polls of the same page that arrive together share one
// statement, and one that arrives after the statement was sent gets its own.
// A fake client counts the statements and answers when the test says so.
function fakeDatabase() {
  const sent: { values: unknown[]; answer: (files: string, total: number) => void }[] = [];
  const prisma = {
    $queryRaw: (_strings: TemplateStringsArray, ...values: unknown[]) =>
      new Promise((resolve) => sent.push({ values, answer: (files, total) => resolve([{ files, total }]) })),
  };
  const files = new FileService({ prisma: prisma as never, store: {} as never, ledger: {} as never, onCleanupError: () => {} });
  return { files, sent };
}

/** Until the event loop has run its check phase (where a waiting page is sent). */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('files: polls of one page share a statement', () => {
  it('when five requests ask for the same page in one turn, then one statement answers all of them with the same text', async () => {
    const { files, sent } = fakeDatabase();
    const asked = Array.from({ length: 5 }, () => files.pageJson(7, 1, 20, 'http://x'));
    await nextTurn();
    expect(sent).to.have.length(1);
    sent[0]!.answer('{"file_id":1}', 1);
    const pages = await Promise.all(asked);
    expect(pages.map((p) => p.filesJson)).to.deep.equal(Array(5).fill('[{"file_id":1}]'));
    expect(pages.map((p) => p.total)).to.deep.equal([1, 1, 1, 1, 1]);
  });

  it('when a request arrives after the statement was sent, then it gets a statement of its own (it must see writes before it)', async () => {
    const { files, sent } = fakeDatabase();
    const first = files.pageJson(7, 1, 20, 'http://x');
    await nextTurn();
    expect(sent).to.have.length(1);
    const second = files.pageJson(7, 1, 20, 'http://x');
    await nextTurn();
    expect(sent).to.have.length(2);
    sent[0]!.answer('', 0);
    sent[1]!.answer('{"file_id":2}', 1);
    expect((await first).filesJson).to.equal('[]');
    expect((await second).filesJson).to.equal('[{"file_id":2}]');
  });

  it('when requests ask for other accounts, pages or limits, then none shares another one\'s statement', async () => {
    const { files, sent } = fakeDatabase();
    void files.pageJson(7, 1, 20, 'http://x');
    void files.pageJson(8, 1, 20, 'http://x');
    void files.pageJson(7, 2, 20, 'http://x');
    void files.pageJson(7, 1, 10, 'http://x');
    await nextTurn();
    expect(sent).to.have.length(4);
    for (const s of sent) s.answer('', 0);
  });

  it('when the shared statement fails, then every request sharing it gets the error, and the next request tries again', async () => {
    const { files, sent } = fakeDatabase();
    const prisma = (files as unknown as { options: { prisma: { $queryRaw: unknown } } }).options.prisma;
    const working = prisma.$queryRaw;
    prisma.$queryRaw = () => Promise.reject(new Error('connection lost'));
    const asked = [files.pageJson(7, 1, 20, 'http://x'), files.pageJson(7, 1, 20, 'http://x')];
    const outcomes = await Promise.allSettled(asked);
    expect(outcomes.map((o) => o.status)).to.deep.equal(['rejected', 'rejected']);
    prisma.$queryRaw = working;
    const again = files.pageJson(7, 1, 20, 'http://x');
    await nextTurn();
    expect(sent).to.have.length(1);
    sent[0]!.answer('', 0);
    expect((await again).total).to.equal(0);
  });
});
