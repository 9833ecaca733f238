package node

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestReloadLimit(t *testing.T) {
	for _, tc := range []struct{ inUse, want uint64 }{
		{10 << 20, 10<<20 + reloadHeadroom},      // small: the headroom
		{1000 << 20, 1500 << 20},                 // large: 1.5×
		{reloadHeadroom * 2, reloadHeadroom * 3}, // where the two meet
	} {
		if got := reloadLimit(tc.inUse); uint64(got) != tc.want {
			t.Errorf("reloadLimit(%d MiB) = %d MiB, want %d MiB", tc.inUse>>20, got>>20, tc.want>>20)
		}
	}
}

func TestBoundReloadMemoryRestores(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	debug.SetMemoryLimit(1 << 62)
	keep := make([]byte, 64<<20) // something live to measure
	runtime.GC()
	in := memoryInUse()
	if in < 64<<20 {
		t.Fatalf("memoryInUse = %d MiB with 64 MiB live", in>>20)
	}
	restore := boundReloadMemory()
	got := debug.SetMemoryLimit(-1)
	if got == 1<<62 || uint64(got) < in || uint64(got) > in*2+reloadHeadroom {
		t.Errorf("limit during the reload = %d MiB with %d MiB in use", got>>20, in>>20)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != 1<<62 {
		t.Errorf("limit after the reload = %d, want the previous one", got)
	}
	// An operator's lower limit stays.
	debug.SetMemoryLimit(int64(in))
	restore = boundReloadMemory()
	if got := debug.SetMemoryLimit(-1); got != int64(in) {
		t.Errorf("a lower GOMEMLIMIT was replaced by %d", got)
	}
	restore()
	runtime.KeepAlive(keep)
}
