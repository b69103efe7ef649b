#!/usr/bin/env bash
# kill -9 trials of retryd under load (issue 19): for each store, TRIALS
# kills of a real retryd process every 0.5–2.5 s while some 300 tasks a
# second are created through its API (a create that got no answer is sent
# again with its idempotency key, as a client does), then a wait for every
# acknowledged task to end. One line per store reports acknowledged, lost,
# stuck, duplicate 200s (and the most for one kill), and the reclaim time
# (kill to next attempt) p50/p99/max of the tasks caught in flight. It
# fails on a lost or stuck task, a duplicate no kill explains, or a task
# caught in flight not tried again within 30 s (the lease is a minute).
#
#   scripts/chaos.sh                          # 100 trials per store
#   TRIALS=3 STORES=sqlite scripts/chaos.sh   # a quick look
#
# PostgreSQL and Redis are the servers .ci/servers starts (override with
# RETRYKIT_POSTGRES_URL and RETRYKIT_REDIS_URL); each run uses a schema or
# key prefix of its own. The run is TestChaos in cmd/retryd (chaos_test.go),
# which builds retryd first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

TRIALS=${TRIALS:-100}
STORES=${STORES:-sqlite postgres redis}
# Some 1.5 s per trial, the restarts, and the final wait, per store.
timeout=$(( (TRIALS * 4 + 300) * $(echo "$STORES" | wc -w) ))s
RETRYKIT_CHAOS=$TRIALS RETRYKIT_CHAOS_STORES=$(echo $STORES | tr ' ' ,) \
  go test -count=1 -timeout "$timeout" -run '^TestChaos$' -v ./cmd/retryd/ |
  grep -E '^(=== RUN|--- |\s+chaos_test.go|PASS|FAIL|ok )' 
