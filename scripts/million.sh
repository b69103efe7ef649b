#!/usr/bin/env bash
# A million tasks (issue 19): on each store, N (a million) PENDING tasks
# due over the next hour, created through POST /retry-tasks/batch (1,000 a
# call, 4 at a time), then one line per store: the create rate, retryd's
# resident memory loaded and after a restart (once its heap is rebuilt,
# which goes on while it already serves and claims), the restart's time to
# /readyz 200, how late a task due 8 s after the stop is sent, and the
# median time of a list page, the next page, status, policy and target
# host filters, and a metrics scrape. The run is TestMillion in cmd/retryd
# (million_test.go), on a real retryd process; figures are reported, not
# asserted.
#
#   scripts/million.sh                              # 1,000,000 per store
#   N=100000 STORES=sqlite scripts/million.sh       # a quick look
#
# PostgreSQL and Redis are the servers .ci/servers starts (override with
# RETRYKIT_POSTGRES_URL and RETRYKIT_REDIS_URL); each store gets a schema or
# key prefix of its own, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

N=${N:-1000000}
STORES=${STORES:-sqlite postgres redis}
RETRYKIT_MILLION=$N RETRYKIT_MILLION_STORES=$(echo $STORES | tr ' ' ,) \
  go test -count=1 -timeout 2h -run '^TestMillion$' -v ./cmd/retryd/ |
  grep -E '^(=== RUN|--- |\s+million_test.go|PASS|FAIL|ok )'
