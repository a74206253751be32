// Prisma's schema engine, compiled to WebAssembly. The Prisma CLI would
// download a native engine on every command; this one ships in an npm
// package and talks to the database through the same driver adapter as the
// client, so migrations run on PGlite and PostgreSQL alike, offline.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { bindMigrationAwareSqlAdapterFactory, type SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import * as bindings from '@prisma/schema-engine-wasm/schema_engine_bg';

export type SchemaEngine = bindings.SchemaEngine;

// The WebAssembly global is in TypeScript's DOM library, not in @types/node; this is the part we use.
declare const WebAssembly: {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(module: object, imports: Record<string, unknown>): Promise<{ exports: Record<string, unknown> }>;
};

let loaded: Promise<void> | undefined;

// The package entry imports the .wasm file as an ES module, which Node cannot
// load, so the module is instantiated here with the JS glue as its imports.
function loadWasm(): Promise<void> {
  loaded ??= (async () => {
    const require = createRequire(import.meta.url);
    const wasmPath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg').replace(/\.js$/, '.wasm');
    const module = await WebAssembly.compile(await readFile(wasmPath));
    const instance = await WebAssembly.instantiate(module, { './schema_engine_bg.js': bindings });
    bindings.__wbg_set_wasm(instance.exports);
    (instance.exports.__wbindgen_start as () => void)();
  })();
  return loaded;
}

export async function openSchemaEngine(
  schema: { path: string; content: string },
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
): Promise<SchemaEngine> {
  await loadWasm();
  const log = () => {};
  return bindings.SchemaEngine.new(
    { datamodels: [[schema.path, schema.content]] },
    log,
    bindMigrationAwareSqlAdapterFactory(adapterFactory),
  );
}
