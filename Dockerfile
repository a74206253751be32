# dropstream: build on the Node LTS image, run the compiled server as the
# unprivileged `node` user. The build stage and the runtime stage use the same
# base image (test/compose.test.ts checks they share a Node major).

# The image's labels (org.opencontainers.image.version, .revision). VERSION
# must be package.json's version, the one place a release writes it: the build
# stops when they differ (test/compose.test.ts checks the default too).
# REVISION: the commit, since the build context has no .git:
#   docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD) .
# It is also what /metrics and `dropstream --version` report as the commit.
ARG VERSION=0.1.0
ARG REVISION=unknown

# ---- build: dependencies, Prisma client, TypeScript -> dist/ ----
FROM node:24-bookworm-slim AS build
WORKDIR /app

# Dependencies first, so this layer is reused until the lockfile changes.
# --ignore-scripts: the postinstall (`npm run build`) needs the sources, which
# are not copied yet; it runs below instead. No dependency needs its own
# install script: @prisma/engines would only download a native engine that
# `prisma generate` does not run (see scripts/generate.mjs).
# No `# syntax=` line: it would pull a Dockerfile frontend image at build
# time; the cache and secret mounts below work with the BuildKit built into
# Docker 20.10 and later, so air-gapped hosts can build.
#
# Behind a TLS-intercepting proxy, npm needs the proxy's CA: pass it as a build
# secret, `docker build --secret id=npm_ca,src=/path/to/ca.pem .`. It is
# mounted for this step only and never stored in a layer or in the image.
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    --mount=type=secret,id=npm_ca \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \
    npm ci --ignore-scripts --no-audit --no-fund

COPY tsconfig.json tsconfig.build.json prisma.config.ts ./
COPY scripts ./scripts
COPY prisma ./prisma
COPY src ./src
# The web app's browser code: the build bundles it into dist/web/ (esbuild).
COPY web ./web
# prisma generate (into src/generated) + tsc -p tsconfig.build.json (into dist/,
# generated client included as dist/generated/prisma) + the web app (dist/web/).
# Declared here, after the install: a new commit rebuilds from this step only.
ARG VERSION
ARG REVISION
RUN manifest=$(node -p 'require("./package.json").version') \
    && if [ "$manifest" != "$VERSION" ]; then echo "Dockerfile: ARG VERSION=$VERSION but package.json says $manifest: change the Dockerfile's default" >&2; exit 1; fi \
    && DROPSTREAM_COMMIT=$REVISION npm run build

# Keep only what the server runs (scripts/prune-runtime.mjs): no dev or
# optional packages (the Prisma CLI and TypeScript are reachable as optional
# peers of @prisma/client, so --omit=dev alone would keep them; koffi's
# binary, an optional package the server needs, is kept), none of
# package.json's `dropstream.buildOnly` (esbuild and the web app's browser
# libraries, already bundled into dist/web/), one Prisma query compiler of
# the ten @prisma/client ships, no source maps or type declarations.
RUN node scripts/prune-runtime.mjs

# ---- runtime ----
FROM node:24-bookworm-slim AS runtime
WORKDIR /app
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="dropstream" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"

# MALLOC_*: what bin/dropstream.js sets for `serve` when they are unset (glibc
# hands freed part buffers and socket reads back to the system at once; docs/performance.md,
# Memory). The launcher also gives V8 its heap sizes, which only node's own
# flags can set, by re-executing itself once (the same pid).
# SHUTDOWN_TIMEOUT=7: `docker stop` sends SIGTERM and, by default, SIGKILL
# 10 s later; 7 s for requests in progress to finish leaves 3 s to clean up
# cut uploads and close (measured: 0.4-1.7 s after cutting an upload and a
# download, the latter on a busy 2-core machine). Give a longer grace period together with a longer
# timeout (compose: stop_grace_period 45s and SHUTDOWN_TIMEOUT=30; docker run
# --stop-timeout; Kubernetes terminationGracePeriodSeconds, 30 by default).
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=65536 \
    HOST=0.0.0.0 \
    DATA_DIR=/data \
    SHUTDOWN_TIMEOUT=7

# Owned by root and read-only to the server: the process cannot rewrite its own code.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Migrations are applied at start from prisma/migrations (src/db/migrate.ts
# resolves ../../prisma/ from dist/db/).
COPY --from=build /app/prisma ./prisma
COPY bin ./bin

# DATA_DIR: PGlite and local objects when no DATABASE_URL / S3 is set, and the
# generated admin token. A named volume mounted here starts with this
# ownership; a bind mount keeps its host owner, which must be uid 1000 (the
# server says so in one line if it cannot write there).
# 0700: the service narrows a wider DATA_DIR at start, with a warning (issue 27).
# `dropstream` on PATH, so `docker exec <container> dropstream accounts create`
# works as the README's commands do outside the image.
RUN mkdir -p /data && chown node:node /data && chmod 700 /data \
    && ln -s /app/bin/dropstream.js /usr/local/bin/dropstream
USER node

EXPOSE 3000
VOLUME /data

# The slim image has no curl; Node 24 has fetch.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

# Node is PID 1 and handles SIGTERM itself (graceful shutdown, SHUTDOWN_TIMEOUT).
STOPSIGNAL SIGTERM
CMD ["node", "bin/dropstream.js", "serve"]
