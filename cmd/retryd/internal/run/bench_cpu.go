package run

import (
	"fmt"
	"os"
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
