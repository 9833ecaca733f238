package policy

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// backWithHugePages asks the kernel (MADV_COLLAPSE, Linux 6.1 and later)
// to back the whole huge pages that lie inside the n bytes at p with huge
// pages. A large partition's nodes are read at random, one path per
// query, and on 4 KiB pages nearly every read of a steered query under
// load also missed the TLB (perf on bench/run.sh's pinned server: huge
// pages saved ≈0.05 µs a steered query). Only pages the slice fills are
// collapsed, so the memory held does not grow; the kernel copies them
// once, at compile time. Errors (an older kernel, THP turned off, no free
// huge page) are ignored: the partition works the same on small pages.
func backWithHugePages(p unsafe.Pointer, n int) {
	at := uintptr(p)
	start := (at + hugePageSize - 1) &^ (hugePageSize - 1)
	end := (at + uintptr(n)) &^ (hugePageSize - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(p), n)
	unix.Madvise(b[start-at:end-at], unix.MADV_COLLAPSE)
}
