#!/usr/bin/env bash
# CI, after the full suite (objects on s3rver): the S3 suites again against a
# real S3, Ceph RGW 16.2 on one node, and the suites only a real store can
# pass (test/real-s3: signatures, part minimums, native ListMultipartUploads,
# lifecycle rules). Prints their counts; RGW is always stopped at the end.
#
# Expects what .ci/run sets up: Node 24 on PATH, node_modules, dist (the fault
# tests spawn bin/dropstream.js), TEST_DATABASE_URL. The RGW scripts are the
# workplace's shared ones (RGW_TOOLS); ports: RGW_PORT 4200, MON_PORT 4202,
# daemons 4230-4259 unless set (they are passed on to rgw-up.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

RGW_TOOLS="${RGW_TOOLS:-/work/shared/tools/rgw}"
export RGW_PORT="${RGW_PORT:-4200}" MEM_BYTES="${MEM_BYTES:-4294967296}"
if [ ! -x "$RGW_TOOLS/rgw-up.sh" ]; then
  echo "rgw-suites: no RGW scripts in $RGW_TOOLS (set RGW_TOOLS)" >&2
  exit 1
fi

if ! command -v radosgw >/dev/null || ! command -v ceph-mon >/dev/null || ! command -v ceph-osd >/dev/null || ! command -v ceph-mgr >/dev/null || ! command -v ceph >/dev/null; then
  echo "rgw-suites: installing Ceph (mon, osd, mgr, radosgw)"
  t=$(date +%s)
  install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ceph-mon ceph-osd ceph-mgr radosgw ceph-common >/dev/null; }
  install || { apt-get update -qq && install; }
  echo "rgw-suites: apt-get install took $(( $(date +%s) - t )) s"
fi

if (exec 3<>"/dev/tcp/127.0.0.1/$RGW_PORT") 2>/dev/null; then
  echo "rgw-suites: port $RGW_PORT is taken (another RGW?); set RGW_PORT, MON_PORT, PORT_MIN and PORT_MAX" >&2
  exit 1
fi

DIR=$(mktemp -d /tmp/dropstream-rgw-XXXXXX)
# Stops mon, osd, mgr and radosgw by their pid files, whatever happens below.
trap '"$RGW_TOOLS/rgw-down.sh" "$DIR" >/dev/null || true' EXIT
"$RGW_TOOLS/rgw-up.sh" "$DIR"
export CEPH_CONF="$DIR/ceph.conf"
# The fault tests SIGKILL radosgw. A killed radosgw's watches on the cache
# objects outlive it until the OSD times them out (30 s by default), and every
# bucket created or deleted meanwhile waits for them: 27 s measured. 10 s is
# the shortest that did not make live watches flap; radosgw is restarted
# (gracefully) so its own watches take the new timeout.
ceph config set osd osd_client_watch_timeout 10
SIG=TERM "$RGW_TOOLS/rgw-restart-gw.sh" stop "$DIR"
"$RGW_TOOLS/rgw-restart-gw.sh" start "$DIR"
echo "rgw-suites: RGW ready after $(( $(date +%s) - started )) s"

export TEST_S3_ENDPOINT="http://127.0.0.1:$RGW_PORT" TEST_S3_ACCESS_KEY_ID=dsaccess TEST_S3_SECRET_ACCESS_KEY=dssecret
export TEST_S3_STOP="SIG=KILL '$RGW_TOOLS/rgw-restart-gw.sh' stop '$DIR'" TEST_S3_START="'$RGW_TOOLS/rgw-restart-gw.sh' start '$DIR'"

# Runs mocha on the given specs; prints its summary; fails unless everything
# passed, nothing was pending and at least one test ran.
run_suites() {
  local name=$1; shift
  local log="$DIR/$name.log" t passing
  t=$(date +%s)
  set +e
  npx mocha --config .ci/mocharc-s3.json "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  set -e
  passing=$(grep -Eo '^ +[0-9]+ passing' "$log" | tail -n 1 | tr -dc 0-9)
  if [ "$status" -ne 0 ] || grep -Eq '^ +[0-9]+ (failing|pending)' "$log" || [ "${passing:-0}" -eq 0 ]; then
    echo "rgw-suites: $name on RGW FAILED ($(grep -Eo '^ +[0-9]+ (passing|failing|pending)' "$log" | tr -s ' ' | paste -sd, -))" >&2
    exit 1
  fi
  echo "rgw-suites: $name on RGW: $passing passing, 0 failing, 0 pending ($(( $(date +%s) - t )) s)"
}

# The S3 suites, as on s3rver. The local-store halves of these files already
# ran in the full suite; they are left out here.
run_suites s3-suites \
  test/contract/s3-store.test.ts \
  test/http/s3.test.ts \
  test/http/s3-startup.test.ts \
  test/http/operations.test.ts \
  test/faults/store-down.test.ts \
  test/faults/crash.test.ts \
  test/faults/abort-failure.test.ts \
  test/faults/stray-uploads.test.ts \
  test/http/download-count.test.ts \
  test/http/tus.test.ts \
  test/http/tus-client.test.ts \
  test/http/tus-sweep.test.ts \
  test/faults/tus-faults.test.ts \
  --grep 'local store|operations: metrics|operations: graceful shutdown' --invert

run_suites real-store-only 'test/real-s3/*.test.ts'

echo "rgw-suites: done in $(( $(date +%s) - started )) s"
