# Sourced by .ci scripts: `newcomer CMD...` runs CMD as a newcomer's shell
# would (issue 37): no TEST_* or service variables, CI unset, and a short PATH
# (node's folder, /usr/bin, /bin: no /usr/sbin, where Debian keeps runuser).
node_bin="$(dirname "$(command -v node)")"
newcomer() {
  env -u CI -u TEST_DATABASE_URL -u TEST_REDIS_URL -u DATABASE_URL -u REDIS_URL -u PGHOST -u PGUSER -u TEST_SERVICES_ONLY \
    -u TEST_S3_ENDPOINT -u TEST_S3_ACCESS_KEY_ID -u TEST_S3_SECRET_ACCESS_KEY -u TEST_S3_REGION -u TEST_S3_STOP -u TEST_S3_START \
    PATH="$node_bin:/usr/bin:/bin" "$@"
}
