//go:build !unix

package bench

import "time"

// processCPU is not measured here (Row.CPUPerTxn stays 0).
func processCPU() time.Duration { return 0 }
