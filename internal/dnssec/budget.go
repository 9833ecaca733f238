package dnssec

import (
	"runtime"
	"sync/atomic"
	"time"
)

// DefaultBudgetPerCore is the default cap on signatures made on queries'
// behalf, per second and per core (GOMAXPROCS): about half of what one
// core can make with ECDSA P-256.
const DefaultBudgetPerCore = 20000

// Budget caps the signatures made on queries' behalf: a generic cell rate
// algorithm over an atomic theoretical arrival time, so Take neither locks
// nor allocates. It allows a burst of a tenth of a second's worth.
type Budget struct {
	interval int64 // nanoseconds per signature
	burst    int64 // nanoseconds of credit
	tat      atomic.Int64
	refused  atomic.Uint64
}

// NewBudget returns a budget of perSecond signatures a second; perSecond
// ≤ 0 means DefaultBudgetPerCore × GOMAXPROCS.
func NewBudget(perSecond int) *Budget {
	if perSecond <= 0 {
		perSecond = DefaultBudgetPerCore * runtime.GOMAXPROCS(0)
	}
	iv := int64(time.Second) / int64(perSecond)
	return &Budget{interval: max(iv, 1), burst: int64(time.Second / 10)}
}

// Take reports whether one more signature may be made at now (Unix
// nanoseconds), and counts it when it may.
func (b *Budget) Take(now int64) bool {
	if b == nil {
		return true
	}
	for {
		tat := b.tat.Load()
		next := max(tat, now) + b.interval
		if next-now > b.burst {
			b.refused.Add(1)
			return false
		}
		if b.tat.CompareAndSwap(tat, next) {
			return true
		}
	}
}

// Refused returns how many signatures the budget has refused.
func (b *Budget) Refused() uint64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}
