#!/usr/bin/env bash
# Regenerates every figure in docs/BENCHMARKS.md: the machine description,
# the library benchmarks (with benchstat), and the retrysim tables and charts.
# The prose in docs/BENCHMARKS.md stays; only the blocks between
# <!-- begin:NAME --> and <!-- end:NAME --> markers are rewritten.
#
#   scripts/benchmarks.sh                      # 10 samples of 1 s per benchmark
#   COUNT=3 BENCHTIME=100ms scripts/benchmarks.sh   # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-1s}
BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
out=docs/benchmarks
doc=docs/BENCHMARKS.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

echo "machine..." >&2
{
  echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit:  $(git rev-parse --short HEAD)"
  echo "go:      $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH)"
  echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs visible"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min averages, before the run)"
  echo "command: (cd benchmarks && go test -run '^\$' -bench . -benchmem -count $COUNT -benchtime $BENCHTIME)"
} > "$out/machine.txt"

echo "benchmarks (count $COUNT, benchtime $BENCHTIME)..." >&2
(cd benchmarks && go test -run '^$' -bench . -benchmem -count "$COUNT" -benchtime "$BENCHTIME") > "$out/bench.txt"
(cd "$out" && go run "$BENCHSTAT" bench.txt) > "$out/benchstat.txt"

# One Markdown row per benchmark: median time with its 95% confidence
# interval, bytes and allocations, and the time relative to Retrykit's.
(cd "$out" && go run "$BENCHSTAT" -format csv bench.txt 2>/dev/null) | awk -F, '
  function human(s) {
    if (s >= 1e-6) return sprintf("%.2f µs", s * 1e6)
    return sprintf("%.1f ns", s * 1e9)
  }
  $2 == "sec/op" || $2 == "B/op" || $2 == "allocs/op" { unit = $2; next }
  $1 == "" || $1 == "geomean" || NF < 2 { next }
  unit != "" {
    name = $1; sub(/-[0-9]+$/, "", name)
    split(name, part, "/lib=")
    if (!(name in seen)) { seen[name] = 1; order[++n] = name; work[name] = part[1]; lib[name] = part[2] }
    val[name, unit] = $2; ci[name, unit] = $3
  }
  END {
    print "| workload | library | time/op (median ± 95% CI) | vs Retrykit | B/op | allocs/op |"
    print "|---|---|--:|--:|--:|--:|"
    for (i = 1; i <= n; i++) {
      k = order[i]; base = work[k] "/lib=retrykit"
      ratio = (val[base, "sec/op"] > 0) ? sprintf("%.1f×", val[k, "sec/op"] / val[base, "sec/op"]) : "?"
      if (lib[k] == "retrykit") ratio = "1×"
      printf "| %s | %s | %s ± %s | %s | %d | %d |\n", work[k], lib[k], human(val[k, "sec/op"]), ci[k, "sec/op"], ratio, val[k, "B/op"], val[k, "allocs/op"]
    }
  }' > "$out/table.md"

echo "retrysim..." >&2
go build -o "$tmp/retrysim" ./cmd/retrysim
"$tmp/retrysim" occ > "$out/occ.txt"
"$tmp/retrysim" occ --strategies none,exponential,equal,full,decorrelated --plot "$out/occ.png" > /dev/null
"$tmp/retrysim" outage > "$out/outage.txt"
"$tmp/retrysim" outage --strategies none,exponential,equal,full,decorrelated --plot "$out/outage.png" > /dev/null
"$tmp/retrysim" outage --strategies full,aws-adaptive,client-limiter,shared-limiter,shared-cubic --plot "$out/outage-limiter.png" > /dev/null
"$tmp/retrysim" amplification --plot "$out/amplification.png" > "$out/amplification.txt"

# splice NAME FILE FENCE: put FILE between NAME's markers in the document,
# inside a code fence when FENCE is set.
splice() {
  awk -v name="$1" -v file="$2" -v fence="$3" '
    $0 == "<!-- begin:" name " -->" {
      print
      if (fence) print "```"
      while ((getline line < file) > 0) print line
      if (fence) print "```"
      skip = 1
      next
    }
    $0 == "<!-- end:" name " -->" { skip = 0 }
    !skip { print }' "$doc" > "$tmp/doc"
  mv "$tmp/doc" "$doc"
}
splice machine "$out/machine.txt" 1
splice table "$out/table.md" ""
splice benchstat "$out/benchstat.txt" 1
splice occ "$out/occ.txt" 1
splice outage "$out/outage.txt" 1
splice amplification "$out/amplification.txt" 1
echo "wrote $doc and $out/" >&2
