package dnsserver_test

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID):
// unlike the wall clock a benchmark reports, it does not count the time
// other work on a shared machine took the core.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
