//go:build !amd64 && !arm64

package policy

import "unsafe"

// prefetch does nothing here (see prefetch_asm.go).
func prefetch(unsafe.Pointer) {}
