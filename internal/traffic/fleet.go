package traffic

import "time"

// fleetView is the other nodes' windows, summed into this node's.
type fleetView struct {
	// spans[0] is the 5m windows, spans[1] the 1h ones: one map per node.
	spans [2][]map[string]*Counts
}

func (f *fleetView) spanIndex(span time.Duration) int {
	if span <= fineSpan {
		return 0
	}
	return 1
}
