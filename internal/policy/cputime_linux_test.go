package policy_test

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time the calling thread has used: on a busy
// machine it tells the work an evaluation did apart from the time it
// waited for a core. (The evaluation runs on one goroutine; the garbage
// collector's own threads are not counted.)
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
