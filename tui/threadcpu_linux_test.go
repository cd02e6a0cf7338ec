package tui

import (
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID: the CPU time of
// the calling thread, to the nanosecond (getrusage's RUSAGE_THREAD counts
// in scheduler ticks here, 4 ms).
const clockThreadCPUTime = 3

// threadCPU is the CPU time the calling OS thread has used, so that a
// benchmark can tell its own work from the time the machine gave to other
// processes. The caller locks its OS thread.
func threadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
