//go:build !linux

package policy

import "unsafe"

// backWithHugePages does nothing here (see hugepages_linux.go).
func backWithHugePages(unsafe.Pointer, int) {}
