//go:build !unix

package run

import "time"

// processCPU is not measured here: the report leaves CPU time out.
func processCPU() time.Duration { return 0 }
