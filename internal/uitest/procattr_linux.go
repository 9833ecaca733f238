package uitest

import "syscall"

// browserProcAttr puts the browser in its own process group and kills it
// when the thread that started it (the test binary's) exits.
func browserProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
