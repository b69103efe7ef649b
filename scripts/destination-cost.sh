#!/usr/bin/env bash
# What destinations cost, measured with retryd bench, ROUNDS interleaved
# rounds on one store (a shared machine drifts: interleaving spreads the
# drift over every variant alike), medians and ranges at the end:
#
#   - single creates through the API (--mode api --runs single) and the
#     loop's attempts/s (--mode loop), tasks without a destination, at BASE
#     (a commit before destinations) and at HEAD: they should not differ;
#   - the loop at HEAD with --destination signed-oauth2 (each attempt
#     signed, OAuth2 tokens from a loopback endpoint, through the gate)
#     against --destination none.
#
#   BASE=dde9dc0 ROUNDS=3 scripts/destination-cost.sh
#   STORE=postgres://postgres@127.0.0.1:5432/test?sslmode=disable scripts/destination-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-3}
BASE=${BASE:-dde9dc0}
STORE=${STORE:-sqlite}
OUT=${OUT:-$(mktemp -d /tmp/destination-cost-XXXXXX)}
mkdir -p "$OUT"

go build -o "$OUT/retryd-head" ./cmd/retryd
tree=$(mktemp -d)
git worktree add --detach -q "$tree" "$BASE"
(cd "$tree" && go build -o "$OUT/retryd-base" ./cmd/retryd)
git worktree remove --force "$tree"
echo "HEAD $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' +changes') against $BASE on $STORE, reports in $OUT" >&2

for r in $(seq "$ROUNDS"); do
  echo "round $r" >&2
  for v in base head; do
    "$OUT/retryd-$v" bench --mode api --runs single --store "$STORE" > "$OUT/api-$v-$r.txt" 2>&1
    "$OUT/retryd-$v" bench --mode loop --skip-lag --store "$STORE" > "$OUT/loop-$v-$r.txt" 2>&1
  done
  "$OUT/retryd-head" bench --mode loop --skip-lag --destination signed-oauth2 --store "$STORE" > "$OUT/loop-signed-$r.txt" 2>&1
done

# median [min–max] of the numbers on standard input
stats() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "n/a"; exit}; printf "%s [%s–%s]", a[int((NR+1)/2)], a[1], a[NR]}'; }
singles() { for f in "$OUT"/api-"$1"-*.txt; do grep -m1 -oE '[0-9]+ tasks/s' "$f" | grep -oE '^[0-9]+'; done; }
loops() { for f in "$OUT"/loop-"$1"-*.txt; do grep -m1 'loop throughput' "$f" | grep -oE '= [0-9]+ attempts/s' | grep -oE '[0-9]+'; done; }
cpus() { for f in "$OUT"/loop-"$1"-*.txt; do grep -m1 'loop throughput' "$f" | grep -oE 'CPU [0-9]+ µs' | grep -oE '[0-9]+'; done; }

echo "single creates, tasks/s:  base $(singles base | stats)  head $(singles head | stats)"
echo "loop, attempts/s:         base $(loops base | stats)  head $(loops head | stats)  head signed-oauth2 $(loops signed | stats)"
echo "loop, CPU µs per attempt: base $(cpus base | stats)  head $(cpus head | stats)  head signed-oauth2 $(cpus signed | stats)"
