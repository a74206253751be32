// esbuild bundles CSS imported from TypeScript (scripts/build-web.mjs).
declare module '*.css';
