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

/** Timers the engine set and that have not fired (see withTrackedTimers). */
const engineTimers = new Set<NodeJS.Timeout>();

/**
 * The glue's imports, with the engine's setTimeout tracked: the engine
 * arms a 10 s timer during migrations that outlives it (freeing the engine
 * does not clear it), and kept a finished `dropstream migrate` or a first
 * start's process alive up to 10 s after its work was done.
 */
function withTrackedTimers(glue: typeof bindings): Record<string, unknown> {
  const name = Object.keys(glue).find((key) => key.startsWith('__wbg_setTimeout_'));
  if (!name) return glue;
  const setTimer = (glue as unknown as Record<string, (fn: () => void, ms: number) => NodeJS.Timeout>)[name]!;
  return {
    ...glue,
    [name]: (fn: () => void, ms: number) => {
      const timer = setTimer(() => {
        engineTimers.delete(timer);
        fn();
      }, ms);
      engineTimers.add(timer);
      return timer;
    },
  };
}

/** Clears the timers engines left behind; called once no engine is in use. */
export function clearEngineTimers(): void {
  for (const timer of engineTimers) clearTimeout(timer);
  engineTimers.clear();
}

// The package entry imports the .wasm file as an ES module, which Node cannot
// load, so the module is instantiated here with the JS glue as its imports.
function loadWasm(): Promise<void> {
  loaded ??= (async () => {
    const require = createRequire(import.meta.url);
    const wasmPath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg').replace(/\.js$/, '.wasm');
    const module = await WebAssembly.compile(await readFile(wasmPath));
    const instance = await WebAssembly.instantiate(module, { './schema_engine_bg.js': withTrackedTimers(bindings) });
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
