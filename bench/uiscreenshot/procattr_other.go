//go:build !linux

package main

import "syscall"

// serverProcAttr: no parent-death signal here; the deferred Kill stops
// the server when this program returns, not when it is killed.
func serverProcAttr() *syscall.SysProcAttr { return nil }
