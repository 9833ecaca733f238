//go:build !linux

package dnsserver_test

import "time"

// threadCPU is not measured on this platform.
func threadCPU() (time.Duration, bool) { return 0, false }
