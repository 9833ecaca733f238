//go:build unix && !linux

package uitest

import "syscall"

// browserProcAttr puts the browser in its own process group; these
// systems have no parent-death signal, so a test binary killed before
// Close leaves it running.
func browserProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
