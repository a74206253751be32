#!/usr/bin/env node
// The compiled CLI lives in dist/, built by `npm ci` (postinstall) or `npm run build`.
import('../dist/cli/index.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist')) {
    process.stderr.write('dropstream: not built yet; run `npm run build`\n');
    process.exit(1);
  }
  throw err;
});
