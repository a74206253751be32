#!/usr/bin/env bash
# CI: the README's `npm test` as a newcomer runs it (issue 37): no
# TEST_DATABASE_URL or TEST_REDIS_URL, and a short PATH (node's folder,
# /usr/bin, /bin: no /usr/sbin, where Debian keeps runuser). The suites that
# need a service must leave themselves out and say so; everything else must
# pass, the suites that start a private PostgreSQL cluster included (this
# machine has PostgreSQL installed; where a machine has not, they are left
# out like the service halves).
#
# The whole suite, not a selection: a test that uses a service without asking
# whether it is there looks like any other until it runs (the PostgreSQL
# stall suite did, in a `before` hook), and a list of "files that behave
# differently" would miss the next one. It is also the only run of the tests
# that need no service: .ci/run's services stage holds only what this run
# cannot (its check names any test neither run holds).
#
# Guards, as for the services stage: CI is unset here (CI=true makes the helpers
# throw when a service is missing, which is what this run is about); the run
# fails unless as many tests passed as `mocha --dry-run` counts in the same
# environment (the halves left out are not defined there either); and the
# "Did not run" summary must name the services that were withheld and
# nothing else, so a suite that starts leaving itself out for another reason
# (PostgreSQL's binaries not found) fails CI instead of passing quietly.
#
# Needs Node 24 first on PATH, node_modules and dist/ (.ci/run has them).
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/newcomer-env.sh

started=$(date +%s)
total=$(mktemp /tmp/dropstream-dry-XXXXXX.json) log=$(mktemp /tmp/dropstream-test-XXXXXX.log)
trap 'rm -f "$total" "$log"' EXIT
# .ci/run has just made the same dry run (NEWCOMER_DRY_RUN names its output): about 10 s saved.
if [ -n "${NEWCOMER_DRY_RUN:-}" ] && [ -s "$NEWCOMER_DRY_RUN" ]; then
  cp "$NEWCOMER_DRY_RUN" "$total"
else
  newcomer npx mocha --no-parallel --dry-run --no-forbid-only --no-forbid-pending --reporter json --reporter-option "output=$total" >/dev/null 2>&1
fi
expected=$(node -p "require('$total').stats.tests")
set +e
newcomer npm test 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passing=$(grep -Eo '^ +[0-9]+ passing' "$log" | tail -n 1 | tr -dc 0-9)
# The summary's lines: "  NOTE: <what> did NOT run; to run it: <how>", once per left-out suite.
left_out=$(sed -n '/^  Did not run:$/,/^$/p' "$log" | grep 'NOTE:' | sort -u || true)
unexpected=$(grep -v -e 'TEST_DATABASE_URL is not set' -e 'TEST_REDIS_URL is not set' <<<"$left_out" || true)
failed=""
if [ "$status" -ne 0 ] || [ "${passing:-0}" -lt "$expected" ]; then failed="${passing:-0} of $expected tests passed (npm test exit $status)"; fi
if [ -n "$unexpected" ]; then failed="${failed:+$failed; }left out for a reason other than the withheld services:
$unexpected"; fi
if ! grep -q 'TEST_DATABASE_URL is not set' <<<"$left_out" || ! grep -q 'TEST_REDIS_URL is not set' <<<"$left_out"; then
  failed="${failed:+$failed; }the summary does not name the withheld services (TEST_DATABASE_URL, TEST_REDIS_URL): did they leak in?"
fi
if [ -n "$failed" ]; then
  echo "ci: npm test without services FAILED: $failed" >&2
  exit 1
fi
echo "ci: npm test without services, PATH=$node_bin:/usr/bin:/bin: $passing of $expected tests passed, $(wc -l <<<"$left_out") suites left out for want of a service, in $(( $(date +%s) - started )) s"
