// `prisma generate` without network access. The CLI wants a native schema
// engine binary it downloads on every command, but generate never runs it:
// naming any existing file is enough. Migrations use the WebAssembly engine.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const env = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY || process.execPath,
  CHECKPOINT_DISABLE: '1',
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
};
const result = spawnSync(process.execPath, ['node_modules/prisma/build/index.js', 'generate'], { env, stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);

// The generated client imports its query compiler as an ES module whose one
// export is the WebAssembly as a 2.2 MB base64 string. An imported module
// lives as long as the process, so that string stayed on the heap twice (the
// module's source and its export): 4.4 MiB of a server's 37 MiB live heap at
// idle, which V8's heap-growth rule multiplies under load (issue 24). Reading
// the file's text instead leaves both to the garbage collector once the
// module is compiled. If a Prisma upgrade changes these lines, generation
// fails here rather than silently keeping the old cost.
const classFile = 'src/generated/prisma/internal/class.ts';
const source = readFileSync(classFile, 'utf8');
const imported = /const \{ wasm \} = await import\("([^"]+\.wasm-base64\.mjs)"\)\n(\s*)return await decodeBase64AsWasm\(wasm\)/;
const match = imported.exec(source);
if (!match) {
  process.stderr.write(`scripts/generate.mjs: ${classFile} no longer imports its query compiler as expected; update the rewrite here\n`);
  process.exit(1);
}
const [, specifier, indent] = match;
const read = [
  `// Rewritten by scripts/generate.mjs: the module's text is read, not imported, so its base64 string does not stay on the heap.`,
  `const [{ readFile }, { createRequire }] = await Promise.all([import('node:fs/promises'), import('node:module')])`,
  `const text = await readFile(createRequire(import.meta.url).resolve(${JSON.stringify(specifier)}), 'utf8')`,
  `return await decodeBase64AsWasm(text.slice(text.indexOf('"') + 1, text.lastIndexOf('"')))`,
].join(`\n${indent}`);
writeFileSync(classFile, source.replace(imported, read));
