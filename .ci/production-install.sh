#!/usr/bin/env bash
# CI: production installs, as an operator makes them, in a temporary copy of
# the repository (the committed files only), each followed by a server start
# that must answer /healthz and /readyz. Timed.
#   1. A fresh clone: `npm ci --omit=dev`, then `npm start` (postinstall builds
#      with the compiler and Prisma CLI that --omit=dev keeps as optional peers).
#   2. The CLI installed globally from the clone, and from a tarball (`npm
#      pack`, then `npm install -g` of it), then `dropstream serve` from the
#      tarball's install.
#   3. The Docker image's way: dist/ kept from 1, `npm ci --omit=dev --omit=optional`
#      (no compiler at all), then `node bin/dropstream.js serve`.
# Needs node and npm on PATH (.ci/run puts Node 24 first).
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d /tmp/dropstream-prod-XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill -TERM -- "-$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

git ls-files -z | xargs -0 cp --parents -t "$work"
cd "$work"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# Starts `$@` in its own process group, waits for /healthz, checks /readyz, stops it.
serve_and_check() {
  local port=$((20000 + RANDOM % 20000)) started
  started="$(now)"
  PORT="$port" ADMIN_PORT=0 HOST=127.0.0.1 DATA_DIR="$work/data" setsid "$@" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then cat "$work/server.log"; echo "server exited before answering"; exit 1; fi
    sleep 0.5
  done
  curl -fsS "http://127.0.0.1:$port/healthz"
  echo
  curl -fsS "http://127.0.0.1:$port/readyz"
  echo
  echo "  answered /healthz $(since "$started") after the start command"
  kill -TERM -- "-$server_pid"
  wait "$server_pid" || true
  server_pid=""
  if grep -v '^{' "$work/server.log"; then echo "non-JSON lines in the server's output (above)"; exit 1; fi
}

echo "== production install of a fresh copy: npm ci --omit=dev"
t="$(now)"
npm ci --omit=dev --no-audit --no-fund --loglevel=error
echo "  npm ci --omit=dev: $(since "$t")"
for dev in mocha chai tsx s3rver; do
  if [[ -e "node_modules/$dev" ]]; then echo "devDependency $dev was installed"; exit 1; fi
done
[[ -f dist/.build-stamp && -f dist/pglite-template/PG_VERSION ]] || { echo "postinstall did not build dist/"; exit 1; }
serve_and_check npm start --silent

# The CLI on a user's machine, as the README says: `npm install -g` of the
# clone (a link to it, so instant), then `dropstream` from another folder.
echo "== the CLI installed globally: npm install -g <clone>"
t="$(now)"
npm install -g --prefix "$work/global" "$work" --no-audit --no-fund --loglevel=error
(cd /tmp && "$work/global/bin/dropstream" help) | grep -q '^  dropstream upload <path>' || { echo "the globally installed dropstream did not run"; exit 1; }
echo "  npm install -g and dropstream help: $(since "$t")"

# A tarball, as `npm pack && npm install -g ./dropstream-0.1.0.tgz` makes one
# (issue 37): package.json's `files` ship bin/, dist/ (built by prepack),
# prisma/ and the build script, no sources and no lockfile. The install
# resolves the dependencies from the registry and builds nothing; then
# `dropstream` must answer --help from another folder, and serve.
echo "== a tarball installed globally: npm pack, then npm install -g <tarball>"
t="$(now)"
mkdir "$work/pack"
npm pack --pack-destination "$work/pack" >"$work/pack.log" 2>&1 || { cat "$work/pack.log"; echo "npm pack failed"; exit 1; }
tarball="$(ls "$work"/pack/dropstream-*.tgz)"
listing="$(tar -tzf "$tarball")"
for wanted in package/bin/dropstream.js package/dist/cli/index.js package/dist/.build-stamp package/dist/pglite-template/PG_VERSION package/prisma/schema.prisma package/scripts/build.mjs package/scripts/build-info.mjs package/dist/build-info.json; do
  grep -qx "$wanted" <<<"$listing" || { echo "the tarball lacks $wanted"; exit 1; }
done
if grep -E '^package/(src|test|\.ci|bench|node_modules)/' <<<"$listing" | head -n 3 | grep .; then echo "the tarball ships sources, tests or CI (above)"; exit 1; fi
echo "  npm pack: $(since "$t"), $(du -h "$tarball" | cut -f1), $(wc -l <<<"$listing") files"
t="$(now)"
npm install -g --prefix "$work/tarball-global" "$tarball" --no-audit --no-fund --loglevel=error
echo "  npm install -g <tarball>: $(since "$t")"
(cd /tmp && "$work/tarball-global/bin/dropstream" --help) | grep -q '^  dropstream upload <path>' || { echo "dropstream --help from the tarball install did not answer"; exit 1; }
rm -rf "$work/data"
pushd /tmp >/dev/null
serve_and_check "$work/tarball-global/bin/dropstream" serve
popd >/dev/null

echo "== without optional packages (no compiler): npm ci --omit=dev --omit=optional, dist/ kept"
t="$(now)"
npm ci --omit=dev --omit=optional --no-audit --no-fund --loglevel=error
echo "  npm ci --omit=dev --omit=optional: $(since "$t")"
if [[ -e node_modules/typescript ]]; then echo "typescript is still installed"; exit 1; fi
rm -rf "$work/data"
serve_and_check node bin/dropstream.js serve
echo "production installs: ok"
