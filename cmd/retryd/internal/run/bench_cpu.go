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

// loadAverage is the machine's one-minute load average where /proc has it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	one, _, _ := strings.Cut(string(b), " ")
	return ", load average " + one
}
