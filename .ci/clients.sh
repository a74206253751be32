#!/usr/bin/env bash
# Clients others wrote that the download tests drive: curl (closes at the last
# byte; -OJ reads only the ASCII filename) and wget (--content-disposition
# reads filename*). Both are usually on the machine already; install them
# from Debian's packages when not. chromium (headless) opens the loadtest's
# HTML report in test/loadtest/report.test.ts. strace watches the local store's
# syncs in test/contract/local-durability.test.ts. pgbouncer (Debian's 1.18,
# in /usr/sbin) runs the service through a pooler in transaction mode in
# test/pooler/; the tests start their own, on a free port (the package's own
# service, where its install starts one, listens on 6432 and is not used;
# here policy-rc.d keeps it stopped). jq runs the curl walkthrough of
# docs/direct-uploads.md in test/direct/curl-walkthrough.test.ts.
set -euo pipefail
missing=()
for tool in curl wget chromium strace jq; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
# Not always on PATH: /usr/sbin.
[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || missing+=(pgbouncer)
if ((${#missing[@]})); then
  echo "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
curl --version | head -n 1
wget --version | head -n 1
chromium --version
strace -V | head -n 1
jq --version
"$(command -v pgbouncer || echo /usr/sbin/pgbouncer)" --version | head -n 1
