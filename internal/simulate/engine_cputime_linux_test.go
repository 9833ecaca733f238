package simulate

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the test process has used: on a busy
// machine it tells the work a simulation did apart from the time it
// waited for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
