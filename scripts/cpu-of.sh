#!/usr/bin/env bash
# Runs a command and reports the CPU time that the processes named NAME
# (pgrep -x: postgres, redis-server) used meanwhile: what a store server on
# this machine spends on a benchmark's work. A process's reaped children
# count with it (PostgreSQL's backends, one per connection, with the
# postmaster); a process that starts and ends within the command without
# a matching parent is missed.
#
#   scripts/cpu-of.sh postgres -- retryd bench --mode api --runs single --tasks 10000 --store postgres://…
#   scripts/cpu-of.sh redis-server -- go run ./benchmarks/queues --system asynq --tasks 10000
#
# Divide by the tasks for the server's CPU per task.
set -euo pipefail
[ $# -ge 3 ] && [ "$2" = "--" ] || { echo "usage: $0 NAME -- COMMAND..." >&2; exit 2; }
name=$1
shift 2
ticks() { # utime+stime+cutime+cstime of the matching processes, in clock ticks
  local total=0 f
  for p in $(pgrep -x -- "$name"); do
    read -r -a f < "/proc/$p/stat" 2>/dev/null || continue
    total=$((total + f[13] + f[14] + f[15] + f[16]))
  done
  echo "$total"
}
before=$(ticks)
"$@"
after=$(ticks)
hz=$(getconf CLK_TCK)
awk -v t=$((after - before)) -v hz="$hz" -v p="$name" 'BEGIN {printf "cpu-of %s: %.2f s of CPU during the command\n", p, t / hz}'
