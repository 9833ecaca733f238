package anycast

import "time"

// Overload detection: the query rate is sampled about once a second. The
// node is overloaded once OverloadOnSamples consecutive samples are above
// the threshold, and stops being so once OverloadOffSamples consecutive
// samples are below OverloadOffFactor times the threshold, so a rate
// hovering around the threshold does not flap the AS path.
const (
	OverloadOnSamples  = 3
	OverloadOffSamples = 5
	OverloadOffFactor  = 0.8
)

// overload turns a monotonically increasing query counter into a rate and
// an overloaded flag with hysteresis. It is not safe for concurrent use.
type overload struct {
	threshold float64 // queries per second; 0: never overloaded

	lastAt    time.Time
	lastCount uint64
	rate      float64 // the last sample, queries per second
	above     int     // consecutive samples above threshold
	below     int     // consecutive samples below threshold × OverloadOffFactor
	on        bool
}

// sample records the counter's value at now. It takes a rate sample when
// at least a second has passed since the last one and reports whether the
// overloaded flag changed.
func (o *overload) sample(now time.Time, count uint64) bool {
	if o.lastAt.IsZero() {
		o.lastAt, o.lastCount = now, count
		return false
	}
	el := now.Sub(o.lastAt)
	if el < time.Second {
		return false
	}
	delta := float64(0)
	if count >= o.lastCount {
		delta = float64(count - o.lastCount)
	}
	o.rate = delta / el.Seconds()
	o.lastAt, o.lastCount = now, count
	if o.threshold <= 0 {
		return false
	}
	if o.rate > o.threshold {
		o.above++
	} else {
		o.above = 0
	}
	if o.rate < o.threshold*OverloadOffFactor {
		o.below++
	} else {
		o.below = 0
	}
	was := o.on
	switch {
	case !o.on && o.above >= OverloadOnSamples:
		o.on = true
	case o.on && o.below >= OverloadOffSamples:
		o.on = false
	}
	return was != o.on
}
