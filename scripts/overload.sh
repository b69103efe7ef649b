#!/usr/bin/env bash
# Issue 17's live target: retryd with 10,000 PENDING tasks for one loopback
# target that answers 503 for 30 s, then admits at most 500 requests a
# second (429 beyond). Per store, one line reports the most requests the
# target received in any second after recovery against its capacity, when
# the last task succeeded, the attempts charged per task and the holds;
# the next line, the requests received in each second after recovery. It
# fails if a task does not succeed, is lost, or is charged an attempt the
# target never received. On a shared store INSTANCES retryd instances
# (default 2) share the tasks, each with its own limiters.
#
#   scripts/overload.sh                                  # SQLite, then PostgreSQL
#   STORES=redis INSTANCES=3 scripts/overload.sh
#   ARGS='--host-limiter-config {"increase":50}' scripts/overload.sh   # retryd flags
#   ARGS=--host-limiter=off STORES=sqlite scripts/overload.sh        # without the limiter
#
# PostgreSQL and Redis are the servers .ci/servers starts (override with
# RETRYKIT_POSTGRES_URL and RETRYKIT_REDIS_URL). The run is TestOverload in
# cmd/retryd (overload_test.go), which builds retryd first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

STORES=${STORES:-sqlite postgres}
RETRYKIT_OVERLOAD=1 RETRYKIT_OVERLOAD_STORES=$(echo $STORES | tr ' ' ,) \
  RETRYKIT_OVERLOAD_INSTANCES=${INSTANCES:-2} RETRYKIT_OVERLOAD_ARGS="${ARGS:-}" \
  go test -count=1 -timeout 30m -run '^TestOverload$' -v ./cmd/retryd/ |
  grep -E '^(--- |\s+overload_test.go|PASS|FAIL|ok )'
