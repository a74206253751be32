// Kept so `npx tsx bench/upload-rss.ts [--store s3|local] 1024 5120` (sizes
// in MiB) still works: the single-upload throughput and peak-RSS measurement
// it made is now the uploads scenario of the suite (bench/run.ts), run for
// our server alone, once per size, with results in bench/data/upload-rss.
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';

const { positionals } = parseArgs({ allowPositionals: true, options: { store: { type: 'string', default: 's3' } } });
const sizes = positionals.length ? positionals.join(',') : '1024';
const args = ['--import', 'tsx', 'bench/run.ts', '--only', 'uploads', '--sizes', sizes, '--parties', 'none', '--reps', '1', '--out', 'bench/data/upload-rss'];
process.exit(spawnSync(process.execPath, args, { stdio: 'inherit' }).status ?? 1);
