// bench/lib/report.ts: every target a scenario states shows up in the
// Targets table of bench/RESULTS.md, a missed one as **no**.
import { expect } from 'chai';
import type { Comparison } from '../bench/lib/context.js';
import { targets } from '../bench/lib/report.js';

const resumable = (kase: string, tus: number, one: number): Comparison => ({
  scenario: 'resumable',
  case: kase,
  reps: 1,
  sides: [{ label: 'dropstream tus, 64 MiB PATCHes', samples: [], median: {} }],
  ratios: { 'MB/s vs dropstream multipart': tus, 'dropstream tus, one PATCH: MB/s vs dropstream multipart': one },
});

describe('bench report: targets', () => {
  it('when resumable uploads ran, then each tus way has its 0.9x target, met or not', () => {
    const rows = targets([resumable('s3, 1024 MiB', 0.85, 0.93)]).filter((t) => t.target.startsWith('resumable'));
    expect(rows).to.deep.equal([
      { target: 'resumable s3, 1024 MiB, dropstream tus, 64 MiB PATCHes: >= 0.9x the plain upload', measured: '0.85x', met: false },
      { target: 'resumable s3, 1024 MiB, dropstream tus, one PATCH: >= 0.9x the plain upload', measured: '0.93x', met: true },
    ]);
  });
});
