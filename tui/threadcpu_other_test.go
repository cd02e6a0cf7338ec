//go:build !linux

package tui

import "time"

// threadCPU is not known here: benchmarks report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
