// `prisma generate` without network access. The CLI wants a native schema
// engine binary it downloads on every command, but generate never runs it:
// naming any existing file is enough. Migrations use the WebAssembly engine.
import { spawnSync } from 'node:child_process';

const env = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY || process.execPath,
  CHECKPOINT_DISABLE: '1',
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
};
const result = spawnSync(process.execPath, ['node_modules/prisma/build/index.js', 'generate'], { env, stdio: 'inherit' });
process.exit(result.status ?? 1);
