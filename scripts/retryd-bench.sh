#!/usr/bin/env bash
# Measures retryd as its users drive it, on each store, ROUNDS times with the
# stores interleaved (a shared machine drifts: interleaving spreads the drift
# over every store alike), and prints the median and range of each figure.
# Every figure comes from `retryd bench --mode api` (see docs/BENCHMARKS.md,
# section 3); the raw reports stay in $OUT.
#
#   scripts/retryd-bench.sh                          # 3 rounds, sqlite postgres redis
#   ROUNDS=1 STORES=sqlite scripts/retryd-bench.sh   # a quick look
#   SUMMARY_ONLY=1 OUT=/tmp/retryd-bench-… scripts/retryd-bench.sh  # summarize again
#   PEERS="river asynq" scripts/retryd-bench.sh --runs single  # River and asynq in each round too
#
# PEERS runs benchmarks/queues (River on PostgreSQL, asynq on Redis: the
# same tasks, enqueued one at a time by 8 clients through their own insert
# calls) after the stores of each round, and ends with each store's single
# creates as a ratio to each peer's, medians of the same rounds.
#
# PostgreSQL and Redis are the servers .ci/servers starts (override with
# RETRYKIT_POSTGRES_URL and RETRYKIT_REDIS_URL); each run uses a schema or
# key prefix of its own and removes it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-3}
STORES=${STORES:-sqlite postgres redis}
OUT=${OUT:-$(mktemp -d /tmp/retryd-bench-XXXXXX)}
PG=${RETRYKIT_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
REDIS=${RETRYKIT_REDIS_URL:-redis://127.0.0.1:6379/0}
mkdir -p "$OUT"

if [ -z "${SUMMARY_ONLY:-}" ]; then
# -buildvcs=true: the report names the commit measured.
go build -buildvcs=true -o "$OUT/retryd" ./cmd/retryd
[ -n "${PEERS:-}" ] && (cd benchmarks && go build -o "$OUT/queues" ./queues)
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' +changes'), $(date -u +%Y-%m-%dT%H:%MZ), reports in $OUT" >&2

for r in $(seq "$ROUNDS"); do
  for s in $STORES; do
    case $s in
      sqlite) url=sqlite ;;
      postgres) url=$PG ;;
      redis) url=$REDIS ;;
      *) echo "unknown store $s" >&2; exit 2 ;;
    esac
    echo "round $r: $s" >&2
    "$OUT/retryd" bench --mode api --store "$url" "$@" > "$OUT/$s-$r.txt" 2>&1 ||
      { echo "retryd bench failed on $s; see $OUT/$s-$r.txt" >&2; tail -5 "$OUT/$s-$r.txt" >&2; exit 1; }
  done
  for p in ${PEERS:-}; do
    case $p in
      # River's workers and inserts each hold a connection: a pool of 16
      # gave it about 15 % more than pgxpool's default of 4 (retryd keeps
      # the default), so River gets it, tuned as in issue 11.
      river) sep='?'; [[ $PG == *\?* ]] && sep='&'; args=(--system river --pg "$PG${sep}pool_max_conns=16") ;;
      asynq) redis_addr=${REDIS#redis://}; args=(--system asynq --redis "${redis_addr%%/*}") ;;
      *) echo "unknown peer $p" >&2; exit 2 ;;
    esac
    echo "round $r: $p" >&2
    "$OUT/queues" "${args[@]}" --tasks "${PEER_TASKS:-20000}" > "$OUT/$p-$r.txt" 2>&1 ||
      { echo "$p failed; see $OUT/$p-$r.txt" >&2; tail -5 "$OUT/$p-$r.txt" >&2; exit 1; }
  done
done
fi

# summary NAME SED STORE: the figure SED pulls from each report of STORE (the
# first match; times in ms), as "NAME: median [min–max]".
summary() {
  local name=$1 expr=$2 store=$3 vals
  vals=$(for f in "$OUT/$store"-*.txt; do sed -nE "$expr" "$f" | head -1; done |
    awk '/µs$/ {printf "%.2f\n", $1/1000; next} /ms$/ {printf "%.2f\n", $1+0; next}
         /[0-9]s$/ {printf "%.0f\n", $1*1000; next} {print $1+0}' | sort -g)
  [ -z "$vals" ] && return
  awk -v name="$name" '{v[NR]=$1} END {printf "  %-36s %s [%s–%s]\n", name, v[int((NR+1)/2)], v[1], v[NR]}' <<<"$vals"
}

for s in $STORES; do
  echo "$s ($ROUNDS rounds: median [min–max])"
  summary "single: tasks/s end to end" 's/^api single: .*: ([0-9]+) tasks\/s end to end.*/\1/p' "$s"
  summary "single: create p50 (ms)" 's/^  create latency p50 ([0-9.]+[µm]?s).*/\1/p' "$s"
  summary "single: create p99 (ms)" 's/^  create latency p50 [^,]*, p99 ([0-9.]+[µm]?s).*/\1/p' "$s"
  # A run's CPU line follows its own first line: each is read in its run's lines only.
  summary "single: retryd CPU per task (µs)" '/^api single:/,/^api [a-z]+:/ s/^  CPU per task: retryd ([0-9]+) µs.*/\1/p' "$s"
  summary "single: machine CPUs busy (%)" '/^api single:/,/^api [a-z]+:/ s/^  CPU per task: .*; the machine.s CPUs ([0-9]+) % busy.*/\1/p' "$s"
  summary "batch: tasks/s end to end" 's/^api batch: .*: ([0-9]+) tasks\/s end to end.*/\1/p' "$s"
  summary "batch: retryd CPU per task (µs)" '/^api batch:/,/^api [a-z]+:/ s/^  CPU per task: retryd ([0-9]+) µs.*/\1/p' "$s"
  summary "batch: machine CPUs busy (%)" '/^api batch:/,/^api [a-z]+:/ s/^  CPU per task: .*; the machine.s CPUs ([0-9]+) % busy.*/\1/p' "$s"
  summary "steady: create p99 (ms)" 's/^api steady: .*create latency p50 [^,]*, p99 ([0-9.]+[µm]?s).*/\1/p' "$s"
  summary "retry: 2nd-attempt lag p50 (ms)" 's/.*second-attempt lag .*\)\) p50 ([0-9.]+[µm]?s).*/\1/p' "$s"
  summary "retry: 2nd-attempt lag p99 (ms)" 's/.*second-attempt lag .* p99 ([0-9.]+[µm]?s), max.*/\1/p' "$s"
  summary "retry: 2nd-attempt lag max (ms)" 's/.*second-attempt lag .* max ([0-9.]+[µm]?s), min.*/\1/p' "$s"
  echo "  lost, duplicates, early (all runs): $(cat "$OUT/$s"-*.txt | sed -nE 's/.* ([0-9]+) duplicates .* ([0-9]+) lost.*/\1 \2/p' |
    awk '{d+=$1; l+=$2} END {printf "%d lost, %d duplicates", l, d}'), $(cat "$OUT/$s"-*.txt |
    sed -nE 's/.*; ([0-9]+) early$/\1/p' | awk '{e+=$1} END {printf "%d early", e}')"
done

# median NAME SED: the median of summary's figure, alone.
median() {
  summary x "$1" "$2" | sed -nE 's/^  x +([0-9.]+) .*/\1/p'
}

single='s/^[a-z]+ ?[a-z]*: [0-9]+ tasks, one (per POST \/retry-tasks|insert each)[^:]*: ([0-9]+) tasks\/s end to end.*/\2/p'
for p in ${PEERS:-}; do
  [ -n "$(ls "$OUT/$p"-*.txt 2>/dev/null)" ] || continue
  echo "$p ($ROUNDS rounds: median [min–max]; benchmarks/queues)"
  summary "single: tasks/s end to end" "$single" "$p"
  summary "single: insert p50 (ms)" 's/^  insert latency p50 ([0-9.]+[µm]?s).*/\1/p' "$p"
  summary "single: insert p99 (ms)" 's/^  insert latency p50 [^,]*, p99 ([0-9.]+[µm]?s).*/\1/p' "$p"
  echo "  lost, duplicates (all runs): $(cat "$OUT/$p"-*.txt | sed -nE 's/.* ([0-9]+) duplicates, ([0-9]+) lost.*/\1 \2/p' |
    awk '{d+=$1; l+=$2} END {printf "%d lost, %d duplicates", l, d}')"
done
for p in ${PEERS:-}; do
  pm=$(median "$single" "$p")
  [ -n "$pm" ] || continue
  for s in $STORES; do
    sm=$(median "$single" "$s")
    [ -n "$sm" ] && awk -v s="$s" -v p="$p" -v a="$sm" -v b="$pm" 'BEGIN {printf "single creates, retryd on %s ÷ %s: %.2f\n", s, p, a/b}'
  done
done
