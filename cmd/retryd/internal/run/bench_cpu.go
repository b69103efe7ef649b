package run

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is what a benchmark run cost the process, and how busy the machine
// was meanwhile. On a shared machine wall-clock rates swing with the other
// load, while the CPU time per attempt stays steady, so the report gives
// both, and the load average to judge the first by.
type usage struct {
	wall time.Time
	cpu  time.Duration
}

func startUsage() usage { return usage{time.Now(), processCPU()} }

// perOp describes the CPU time spent since u per op of n, or says nothing
// when the platform does not report CPU time.
func (u usage) perOp(n int64, op string) string {
	cpu := processCPU() - u.cpu
	if cpu <= 0 || n <= 0 {
		return ""
	}
	wall := time.Since(u.wall)
	return fmt.Sprintf("; CPU %.0f µs per %s (%.2f cores)%s", float64(cpu.Microseconds())/float64(n), op,
		cpu.Seconds()/wall.Seconds(), loadAverage())
}

// cost is the CPU time spent since u per task of n, and how many cores
// that kept busy.
func (u usage) cost(n int64) string {
	cpu := processCPU() - u.cpu
	if cpu <= 0 || n <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.0f µs (%.2f cores)", float64(cpu.Microseconds())/float64(n), cpu.Seconds()/time.Since(u.wall).Seconds())
}

// loadAverages is the machine's 1, 5 and 15 minute load averages where
// /proc has them.
func loadAverages() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// loadAverage is the machine's one-minute load average where /proc has it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	one, _, _ := strings.Cut(string(b), " ")
	return ", load average " + one
}

// machineTicks is the machine's CPU time, all CPUs together, from the
// first line of /proc/stat: the ticks spent busy (everything but idle and
// I/O wait) and in all; ok is false where there is no /proc.
func machineTicks() (busy, all uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal (guest time is
	// counted in user already).
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		all += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, all, true
}

// machineUse is a reading of machineTicks, to tell how busy the machine
// was from then on: a run whose CPUs sat partly idle was bound by latency,
// not by them.
type machineUse struct {
	busy, all uint64
	ok        bool
}

func startMachineUse() machineUse {
	busy, all, ok := machineTicks()
	return machineUse{busy, all, ok}
}

// since is the share of the machine's CPU time since m that was busy, as
// "; the machine's CPUs 68 % busy", or "" where there is no /proc.
func (m machineUse) since() string {
	busy, all, ok := machineTicks()
	if !ok || !m.ok || all <= m.all {
		return ""
	}
	return fmt.Sprintf("; the machine's CPUs %.0f %% busy", 100*float64(busy-m.busy)/float64(all-m.all))
}
