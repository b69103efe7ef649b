#!/usr/bin/env bash
# Crashes of the store's own server under load, with one retryd riding
# through them (issue 19): CRASHES times, every 1–3 s, while some 300 tasks
# a second are created through retryd's API:
#   - a Redis of the run's own (its own port and directory) killed with
#     kill -9, with appendfsync always, then everysec;
#   - a PostgreSQL cluster of the run's own (initdb under /tmp, its own
#     port; the shared server is never touched; needs root and a postgres
#     user) stopped with pg_ctl stop -m immediate.
# One line per case reports acknowledged, lost (and how long before the
# crash the lost ones were acknowledged) and stuck tasks. It fails on a
# stuck task, or a lost one where nothing may be lost (appendfsync always,
# PostgreSQL). The run is TestStoreCrash in cmd/retryd (storecrash_test.go).
#
#   scripts/storecrash.sh                 # 20 crashes per case
#   CRASHES=3 scripts/storecrash.sh       # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

CRASHES=${CRASHES:-20}
RETRYKIT_STORE_CRASH=$CRASHES go test -count=1 -timeout $(( CRASHES * 30 + 600 ))s -run '^TestStoreCrash$' -v ./cmd/retryd/ |
  grep -E '^(=== RUN|--- |\s+storecrash_test.go|\s+chaos_test.go|PASS|FAIL|ok )'
