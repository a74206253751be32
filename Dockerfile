# syntax=docker/dockerfile:1
# dropstream: build on the Node LTS image, run the compiled server as the
# unprivileged `node` user. The build stage and the runtime stage use the same
# base image (test/compose.test.ts checks they share a Node major).

# ---- build: dependencies, Prisma client, TypeScript -> dist/ ----
FROM node:24-bookworm-slim AS build
WORKDIR /app

# Dependencies first, so this layer is reused until the lockfile changes.
# --ignore-scripts: the postinstall (`npm run build`) needs the sources, which
# are not copied yet; it runs below instead. No dependency needs its own
# install script: @prisma/engines would only download a native engine that
# `prisma generate` does not run (see scripts/generate.mjs).
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund

COPY tsconfig.json tsconfig.build.json prisma.config.ts ./
COPY scripts ./scripts
COPY prisma ./prisma
COPY src ./src
# prisma generate (into src/generated) + tsc -p tsconfig.build.json (into dist/,
# generated client included as dist/generated/prisma).
RUN npm run build

# Keep only what the server loads. --omit=optional as well: the Prisma CLI and
# TypeScript are reachable as optional peers of @prisma/client, so --omit=dev
# alone would keep them (and TypeScript's native compiler); the only other
# optional package, pg-cloudflare, is loaded by pg on Cloudflare Workers only.
RUN npm prune --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

# ---- runtime ----
FROM node:24-bookworm-slim AS runtime
WORKDIR /app

# MALLOC_*: what `npm start` sets; glibc hands freed upload part buffers back
# to the system at once (README, "Objects in S3 or MinIO").
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    HOST=0.0.0.0 \
    DATA_DIR=/data

# Owned by root and read-only to the server: the process cannot rewrite its own code.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Migrations are applied at start from prisma/migrations (src/db/migrate.ts
# resolves ../../prisma/ from dist/db/).
COPY --from=build /app/prisma ./prisma
COPY bin ./bin

# DATA_DIR: PGlite and local objects when no DATABASE_URL / S3 is set, and the
# generated admin token. A named volume mounted here starts with this ownership.
RUN mkdir -p /data && chown node:node /data
USER node

EXPOSE 3000
VOLUME /data

# The slim image has no curl; Node 24 has fetch.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

# Node is PID 1 and handles SIGTERM itself (graceful shutdown, SHUTDOWN_TIMEOUT).
CMD ["node", "bin/dropstream.js", "serve"]
