//go:build linux

package dnssec

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (every thread: the
// garbage collector's work on what a benchmark allocates counts), which a
// machine shared with other loads does not inflate as it does wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
