package fleetnode

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/traffic"
)

// Every node publishes its traffic windows (answers per pool, rule and
// scope over the last 5 minutes and hour; internal/traffic) under
// P/traffic/NODE with its lease, every 30 s and at once when it applies a
// new bundle, and follows every node's: its recorder's windows are then
// the fleet's sum. A node gone takes its key with its lease.

// TrafficPublishEvery is how often a node publishes its windows.
const TrafficPublishEvery = 30 * time.Second

func trafficPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/traffic/" }

// trafficShare publishes a recorder's windows and sums the others'.
type trafficShare struct {
	r     *traffic.Recorder
	every time.Duration // TrafficPublishEvery; tests shorten it
	kick  chan struct{}

	mu      sync.Mutex
	dropped int // records left out of the last publication
}

// ShareTraffic makes the member publish r's windows and sum the other
// nodes' into r (call it before Start).
func (m *Member) ShareTraffic(r *traffic.Recorder) {
	m.traffic = &trafficShare{r: r, every: TrafficPublishEvery, kick: make(chan struct{}, 1)}
}

// trafficChanged publishes at once (a new bundle is served).
func (m *Member) trafficChanged() {
	if ts := m.traffic; ts != nil {
		select {
		case ts.kick <- struct{}{}:
		default:
		}
	}
}

// startTraffic runs the publisher and the follower until ctx ends (from
// Start, after ShareTraffic).
func (m *Member) startTraffic(ctx context.Context) {
	ts := m.traffic
	if ts == nil {
		return
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.publishTraffic(ctx, ts)
	}()
	go func() {
		defer m.wg.Done()
		p := trafficPrefix(m.prefix)
		self := m.local.Fleet.Node
		m.followView(ctx, p, func(view map[string][]byte, _ int64) {
			byNode := make(map[string][]byte, len(view))
			for k, v := range view {
				byNode[strings.TrimPrefix(k, p)] = v
			}
			if err := ts.r.SetFleet(self, byNode); err != nil {
				m.log.Warn("fleet: another node's traffic windows cannot be read", "err", err)
			}
		})
		ts.r.SetFleet(self, nil)
	}()
}

// publishTraffic writes the windows under the node's lease every period,
// at once on a kick, and as soon as there is a lease.
func (m *Member) publishTraffic(ctx context.Context, ts *trafficShare) {
	key := trafficPrefix(m.prefix) + m.local.Fleet.Node
	for {
		wait := ts.every
		if !m.putTraffic(ctx, ts, key) {
			wait = min(wait, 250*time.Millisecond) // no lease yet, or the store failed
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ts.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// putTraffic publishes once; false when it could not.
func (m *Member) putTraffic(ctx context.Context, ts *trafficShare, key string) bool {
	m.mu.Lock()
	l := m.lease
	m.mu.Unlock()
	if l == nil {
		return false
	}
	data, dropped, err := ts.r.Publish(m.local.Fleet.Node)
	if err != nil {
		m.log.Warn("fleet: the node's traffic windows cannot be published", "err", err)
		return true // not the store's fault: try again next period
	}
	ts.mu.Lock()
	if dropped > 0 && ts.dropped == 0 {
		m.log.Warn("fleet: the traffic windows leave out the least answered records to stay under the bound",
			"dropped", dropped, "bound_bytes", traffic.MaxPublished)
	}
	ts.dropped = dropped
	ts.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := l.Put(cctx, key, data); err != nil {
		if !errors.Is(err, context.Canceled) {
			m.log.Debug("fleet: the node's traffic windows were not written", "err", err)
		}
		return false
	}
	return true
}
