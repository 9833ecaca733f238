//go:build amd64 || arm64

package policy

import "unsafe"

// prefetch starts loading the cache line at p into the processor's caches
// and returns without waiting (PREFETCHT0, PRFM PLDL1KEEP): Go has no
// portable way to ask it. It never faults.
//
//go:noescape
func prefetch(p unsafe.Pointer)
