package node

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// While a reload builds the next snapshot, the one being served stays in
// memory, and the build makes garbage (parsed records it then finds equal
// to the served ones, which it shares). Left alone, the Go runtime lets
// the heap grow to twice what is live before it collects, so a reload of
// a large zone would double the node's RSS. boundReloadMemory sets a soft
// memory limit for the time of the build instead: 1.5× the memory in use
// when it starts (and at least 128 MiB above it, so that small
// configurations never make the collector work harder), which keeps the
// peak RSS within 1.5× the steady state whenever the new snapshot shares
// what did not change (RSS also holds the binary and other memory the
// limit does not count, so the ratio of RSS stays below that of the
// limit). At 1.45× the reload of a 1 M-record zone took 9.2 s, the
// collector running back to back; at 1.5×, 7.6 s with a peak of 1.45×.
// The operator's own limit (GOMEMLIMIT), when lower, stays in force, and
// is restored afterwards.

// reloadHeadroom is the least memory a reload may use beyond the steady state.
const reloadHeadroom = 128 << 20

var memSamples = []metrics.Sample{
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/gc/heap/live:bytes"},
}

// memoryInUse is the memory the runtime holds for live data: everything
// it has mapped, less the free and released heap, and less the garbage
// the heap holds since the last collection.
func memoryInUse() uint64 {
	s := make([]metrics.Sample, len(memSamples))
	copy(s, memSamples)
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return 0
		}
	}
	total, released, free, objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64(), s[4].Value.Uint64()
	used := total - released - free
	if objects > live {
		used -= objects - live // garbage not yet collected
	}
	return used
}

// reloadLimit is the memory limit for a build that starts with inUse bytes
// in use.
func reloadLimit(inUse uint64) int64 {
	limit := max(inUse*150/100, inUse+reloadHeadroom)
	if limit > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(limit)
}

// boundReloadMemory sets the memory limit for a reload's build and returns
// the function that restores the previous one.
func boundReloadMemory() (restore func()) {
	prev := debug.SetMemoryLimit(-1)
	limit := reloadLimit(memoryInUse())
	if limit >= prev {
		return func() {}
	}
	debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(prev) }
}

// releaseDelay is how long after a swap the memory of the replaced
// snapshot (and of the build's garbage) is given back to the system: long
// enough for the queries that started on the old snapshot to finish
// (microseconds), short enough that RSS is back to the steady state soon
// after a reload instead of staying at its peak.
const releaseDelay = 100 * time.Millisecond

func (n *Node) releaseMemory() {
	if n.freeing.Swap(true) {
		return // one is due already
	}
	time.AfterFunc(releaseDelay, func() {
		n.freeing.Store(false)
		debug.FreeOSMemory()
	})
}
