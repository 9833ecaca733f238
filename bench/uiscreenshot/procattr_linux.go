package main

import "syscall"

// serverProcAttr has the server killed when this program's thread that
// started it exits, however it exits.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
