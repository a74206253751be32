// Part of `npm run build`: makes dist/pglite-template, the empty database a
// new embedded DATA_DIR starts from (see src/db/pglite-template.ts), unless
// the one there was made by the installed PGlite. Runs after tsc.
import { setFlagsFromString } from 'node:v8';

// As the server does (src/db/wasm-tiering.ts): no TurboFan compile of PGlite.
setFlagsFromString('--no-wasm-tier-up');
setFlagsFromString('--no-wasm-dynamic-tiering');
const { buildTemplate, templateDir } = await import('../dist/db/pglite-template.js');
const started = Date.now();
if (await buildTemplate()) console.log(`made ${templateDir} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
